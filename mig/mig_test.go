package mig

import (
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// TestTablesMatchTheMocks: every model's profiles are those of go-nvml's
// mock GPU of that model, profile by profile: its ID, compute slices,
// instances, memory and placements, and the GPU's memory.
func TestTablesMatchTheMocks(t *testing.T) {
	for _, tt := range []struct {
		model string
		mock  gpus.Config
	}{
		{"A100-40GB", gpus.A100_SXM4_40GB},
		{"A100-80GB", gpus.A100_SXM4_80GB},
		{"A100-PCIE-80GB", gpus.A100_PCIE_80GB},
		{"A30", gpus.A30_PCIE_24GB},
		{"H100", gpus.H100_SXM5_80GB},
		{"H200", gpus.H200_SXM5_141GB},
		{"B200", gpus.B200_SXM5_180GB},
	} {
		m, err := Lookup(tt.model)
		if err != nil {
			t.Fatalf("%s: %v", tt.model, err)
		}
		if m.MemoryMB != int(tt.mock.MemoryMB) {
			t.Errorf("%s: %d MB, the mock %d", m.Name, m.MemoryMB, tt.mock.MemoryMB)
		}
		mp := tt.mock.MIGProfiles
		if len(m.Profiles) != len(mp.GpuInstanceProfiles) {
			t.Errorf("%s: %d profiles, the mock %d", m.Name, len(m.Profiles), len(mp.GpuInstanceProfiles))
		}
		for _, p := range m.Profiles {
			info, ok := mp.GpuInstanceProfiles[p.ID]
			if !ok {
				t.Errorf("%s %s: the mock has no profile %d", m.Name, p.Name, p.ID)
				continue
			}
			if int(info.SliceCount) != p.Slices || int(info.InstanceCount) != p.Instances || int(info.MemorySizeMB) != p.MemoryMB {
				t.Errorf("%s %s: %d slices, %d instances, %d MB; the mock %d, %d, %d", m.Name, p.Name, p.Slices, p.Instances, p.MemoryMB,
					info.SliceCount, info.InstanceCount, info.MemorySizeMB)
			}
			var want []Placement
			for _, pl := range mp.GpuInstancePlacements[p.ID] {
				want = append(want, Placement{Start: int(pl.Start), Size: int(pl.Size)})
			}
			if !slices.Equal(p.Placements, want) {
				t.Errorf("%s %s: placements %v, the mock %v", m.Name, p.Name, p.Placements, want)
			}
			// The name says the compute slices first.
			if !strings.HasPrefix(p.Name, string(rune('0'+p.Slices))+"g.") {
				t.Errorf("%s: profile %s has %d slices", m.Name, p.Name, p.Slices)
			}
		}
	}
}

// TestFit: layouts one GPU holds, and those it does not, with the reason.
func TestFit(t *testing.T) {
	for _, tt := range []struct {
		model  string
		layout []string
		err    string
	}{
		{"A100-80GB", []string{"3g.40gb", "3g.40gb"}, ""},
		{"A100-80GB", []string{"4g.40gb", "3g.40gb"}, ""},
		{"A100-80GB", []string{"7g.80gb"}, ""},
		{"A100-80GB", []string{"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"}, ""},
		{"A100-80GB", []string{"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"}, ""},
		{"A100-80GB", []string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, ""},
		{"a100 sxm4 80gb", []string{"3G.40GB"}, ""},
		{"A100-80GB", []string{"3g.40gb", "3g.40gb", "1g.10gb"}, "the instances need 90240 MB of memory; one A100-80GB has 81920 MB"},
		{"A100-80GB", []string{"4g.40gb", "4g.40gb"}, "2 instances of 4g.40gb: one A100-80GB holds at most 1"},
		{"A100-80GB", []string{"7g.80gb", "1g.10gb"}, "the instances need 90240 MB of memory; one A100-80GB has 81920 MB"},
		{"A100-80GB", []string{"4g.40gb", "2g.20gb", "2g.20gb"}, "the instances 4g.40gb, 2g.20gb, 2g.20gb do not fit on one A100-80GB together: no placement of each leaves the others room"},
		{"A100-80GB", []string{"3g.20gb"}, `"3g.20gb" is no MIG profile of the A100-80GB; its profiles are 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb`},
		{"A100-40GB", []string{"3g.20gb", "3g.20gb"}, ""},
		{"A100-80GB", nil, `an empty layout: name the GPU instances of each GPU, such as ["3g.40gb", "3g.40gb"]`},
		{"H100", []string{"3g.40gb", "3g.40gb"}, ""},
		{"A30", []string{"2g.12gb", "1g.6gb", "1g.6gb"}, ""},
		{"A30", []string{"4g.24gb", "1g.6gb"}, "the instances need 29180 MB of memory; one A30 has 24576 MB"},
	} {
		m, err := Lookup(tt.model)
		if err != nil {
			t.Fatalf("%s: %v", tt.model, err)
		}
		err = m.Fit(tt.layout)
		if got := errText(err); got != tt.err {
			t.Errorf("%s %v: %q, want %q", tt.model, tt.layout, got, tt.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestProfileName: a GPU instance profile's name, from the GPU's name as
// NVML gives it and NVML's profile ID; none for what the tables lack.
func TestProfileName(t *testing.T) {
	for _, tt := range []struct {
		gpu  string
		id   int
		want string
	}{
		{gpus.A100_SXM4_80GB.Name, 2, "3g.40gb"},
		{gpus.A100_SXM4_40GB.Name, 2, "3g.20gb"},
		{gpus.A100_SXM4_80GB.Name, 7, "1g.10gb+me"},
		{gpus.H200_SXM5_141GB.Name, 4, "7g.141gb"},
		{gpus.A100_SXM4_80GB.Name, 5, ""},
		{"Tesla T4", 0, ""},
	} {
		if got := ProfileName(tt.gpu, tt.id); got != tt.want {
			t.Errorf("ProfileName(%q, %d) = %q, want %q", tt.gpu, tt.id, got, tt.want)
		}
	}
}

// TestLookup: a model without MIG, an A100 of unnamed memory and no model
// are refused, saying what would do.
func TestLookup(t *testing.T) {
	for _, tt := range []struct{ model, err string }{
		{"H100-SXM5-80GB", ""},
		{"NVIDIA A100-SXM4-80GB", ""},
		{"Mock NVIDIA A100-SXM4-40GB", ""},
		{"A100", `gpu_model "A100": an A100's MIG profiles depend on its memory: write A100-40GB or A100-80GB`},
		{"T4", `gpu_model "T4" has no MIG profiles the project knows; the GPUs with MIG are A100-40GB, A100-80GB, A30, H100-80GB, H200-141GB, B200-180GB`},
		{"", "a pool with MIG needs its gpu_model, one of A100-40GB, A100-80GB, A30, H100-80GB, H200-141GB, B200-180GB"},
	} {
		_, err := Lookup(tt.model)
		if got := errText(err); got != tt.err {
			t.Errorf("Lookup(%q): %q, want %q", tt.model, got, tt.err)
		}
	}
}

// TestH100AgreesWithA100_80GB: the H100 80GB has the A100 80GB's profile
// names and geometry (its mock's placements differ: the memory check
// keeps the answers alike). Fit agrees on both for every layout of up to
// eight instances.
func TestH100AgreesWithA100_80GB(t *testing.T) {
	h, _ := Lookup("H100")
	a, _ := Lookup("A100-80GB")
	names := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	var rec func(start int, layout []string)
	diffs := 0
	rec = func(start int, layout []string) {
		if len(layout) > 0 {
			he, ae := h.Fit(layout), a.Fit(layout)
			if (he == nil) != (ae == nil) {
				diffs++
				if diffs <= 6 {
					t.Errorf("%v: H100 %v; A100-80GB %v", layout, he, ae)
				}
			}
		}
		if len(layout) == 8 {
			return
		}
		for i := start; i < len(names); i++ {
			rec(i, append(append([]string(nil), layout...), names[i]))
		}
	}
	rec(0, nil)
	t.Logf("%d layouts differ", diffs)
}

// TestOneMediaInstance: the A30 has one JPEG decoder and one OFA, which
// each +me profile takes: two +me instances never fit together.
func TestOneMediaInstance(t *testing.T) {
	m, _ := Lookup("A30")
	if err := m.Fit([]string{"1g.6gb+me", "2g.12gb+me"}); err == nil {
		t.Errorf("A30 accepts 1g.6gb+me with 2g.12gb+me")
	}
}
