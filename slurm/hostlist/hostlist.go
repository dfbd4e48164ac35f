package hostlist

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Max bounds the names one hostlist expands to: more is a mistake
// (or an attack on memory), not a cluster.
const Max = 1 << 20

// ErrTooMany is a hostlist that expands to more than Max names.
var ErrTooMany = errors.New("hostlist expands to more than 1048576 names")

// Expand expands a Slurm hostlist, as Slurm's commands print and its
// ResumeProgram and SuspendProgram are given ("gpu-[01-04,07],login1",
// "rack[1-2]-gpu[1-3]"), into its names, in the list's order. A range
// keeps the width of its first bound ("[01-10]" gives "01" ... "10"). An
// error names what is malformed: an unclosed or nested bracket, an empty
// item, a range that is not two numbers low to high, or more than
// Max names.
func Expand(list string) ([]string, error) {
	var out []string
	for _, item := range splitTop(list) {
		if item == "" {
			return nil, fmt.Errorf("hostlist %q: an empty name", list)
		}
		names, err := expandItem(item, Max-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", list, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTop splits a hostlist at the commas outside brackets.
func splitTop(list string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, list[start:i])
				start = i + 1
			}
		}
	}
	return append(out, list[start:])
}

// expandItem expands one name of a hostlist, with any number of bracket
// groups, into at most room names.
func expandItem(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, fmt.Errorf("%q: a ']' without its '['", item)
		}
		if room < 1 {
			return nil, ErrTooMany
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q: a '[' without its ']'", item)
	}
	end += open
	prefix, group, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(prefix, "]") || strings.ContainsAny(group, "[") {
		return nil, fmt.Errorf("%q: brackets out of order or nested", item)
	}
	tails, err := expandItem(rest, room)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, part := range strings.Split(group, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		from, err1 := strconv.Atoi(lo)
		to, err2 := strconv.Atoi(hi)
		if lo == "" || hi == "" || err1 != nil || err2 != nil || from < 0 || to < from {
			return nil, fmt.Errorf("%q: %q is not a number or a range of numbers, low to high", item, part)
		}
		if (to-from+1)*len(tails) > room-len(out) {
			return nil, ErrTooMany
		}
		for n := from; n <= to; n++ {
			num := fmt.Sprintf("%0*d", len(lo), n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

// Compress writes names as a Slurm hostlist, sorted, without
// repeats or empty names: names that differ only in a trailing number of
// one width share a bracket ("gpu-[01-04,07]"); the rest are listed as
// they are. Expand gives the names back (those without brackets or
// commas, which no host's name has).
func Compress(names []string) string {
	var plain []string
	groups := map[[2]string][]int{} // prefix, width -> numbers
	for _, name := range names {
		if name == "" {
			continue
		}
		i := len(name)
		for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
			i--
		}
		digits := name[i:]
		n, err := strconv.Atoi(digits)
		if digits == "" || err != nil || len(digits) > 9 || strings.ContainsAny(name, "[],") {
			plain = append(plain, name)
			continue
		}
		k := [2]string{name[:i], strconv.Itoa(len(digits))}
		groups[k] = append(groups[k], n)
	}
	var items []string
	for k, ns := range groups {
		slices.Sort(ns)
		ns = slices.Compact(ns)
		width, _ := strconv.Atoi(k[1])
		if len(ns) == 1 {
			items = append(items, fmt.Sprintf("%s%0*d", k[0], width, ns[0]))
			continue
		}
		var parts []string
		for i := 0; i < len(ns); {
			j := i
			for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
				j++
			}
			if j == i {
				parts = append(parts, fmt.Sprintf("%0*d", width, ns[i]))
			} else {
				parts = append(parts, fmt.Sprintf("%0*d-%0*d", width, ns[i], width, ns[j]))
			}
			i = j + 1
		}
		items = append(items, k[0]+"["+strings.Join(parts, ",")+"]")
	}
	slices.Sort(plain)
	items = append(items, slices.Compact(plain)...)
	slices.SortFunc(items, func(a, b string) int { return cmp.Compare(a, b) })
	return strings.Join(items, ",")
}
