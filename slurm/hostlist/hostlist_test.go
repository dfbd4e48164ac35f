package hostlist

import (
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for _, tt := range []struct {
		list string
		want string // the names, space-separated
		err  string
	}{
		{list: "gpu-1", want: "gpu-1"},
		{list: "gpu-[1-3]", want: "gpu-1 gpu-2 gpu-3"},
		{list: "gpu-[01-03,07],login", want: "gpu-01 gpu-02 gpu-03 gpu-07 login"},
		{list: "gpu-[8-10]", want: "gpu-8 gpu-9 gpu-10"},
		{list: "rack[1-2]-gpu[1-2]", want: "rack1-gpu1 rack1-gpu2 rack2-gpu1 rack2-gpu2"},
		{list: "a[1,3]b", want: "a1b a3b"},
		{list: "", err: "an empty name"},
		{list: "a,,b", err: "an empty name"},
		{list: "gpu-[1-3", err: "a '[' without its ']'"},
		{list: "gpu-1]", err: "a ']' without its '['"},
		{list: "gpu-[3-1]", err: `"3-1" is not a number or a range of numbers, low to high`},
		{list: "gpu-[a]", err: `"a" is not a number`},
		{list: "gpu-[]", err: `"" is not a number`},
		{list: "gpu-[1-[2]]", err: "brackets out of order or nested"},
		{list: "n[0-999999999]", err: "more than 1048576 names"},
		{list: "a[0-1023]b[0-1024]", err: "more than 1048576 names"},
	} {
		got, err := Expand(tt.list)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("Expand(%q): %v, want an error saying %q", tt.list, err, tt.err)
		case tt.err == "" && (err != nil || strings.Join(got, " ") != tt.want):
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.list, got, err, tt.want)
		}
	}
}

func TestCompress(t *testing.T) {
	for _, tt := range []struct {
		names []string
		want  string
	}{
		{[]string{"gpu-3", "gpu-1", "gpu-2", "gpu-7", "gpu-2"}, "gpu-[1-3,7]"},
		{[]string{"gpu-01", "gpu-02", "gpu-10", "gpu-1"}, "gpu-1,gpu-[01-02,10]"},
		{[]string{"login", "gpu-5", ""}, "gpu-5,login"},
		{nil, ""},
	} {
		if got := Compress(tt.names); got != tt.want {
			t.Errorf("Compress(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
}

// FuzzHostlist: expanding never panics nor exceeds Max, and what
// Compress writes expands to the names it was given.
func FuzzHostlist(f *testing.F) {
	for _, s := range []string{"gpu-[01-04,07],login", "rack[1-2]-gpu[1-3]", "a,,b", "x[9-1]", "n[0-99999]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		names, err := Expand(list)
		if err != nil {
			return
		}
		if len(names) > Max {
			t.Fatalf("%q expands to %d names", list, len(names))
		}
		back, err := Expand(Compress(names))
		if len(names) > 0 && err != nil {
			t.Fatalf("Compress(%q) = %q does not expand: %v", names, Compress(names), err)
		}
		want := slices.Clone(names)
		slices.Sort(want)
		want = slices.Compact(want)
		slices.Sort(back)
		if len(names) > 0 && !slices.Equal(back, want) {
			t.Fatalf("%q: compressed %q expands to %q", list, Compress(names), back)
		}
	})
}
