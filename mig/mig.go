// Package mig knows the MIG (Multi-Instance GPU) profiles of the NVIDIA GPUs
// that have them, and whether a layout of GPU instances fits on one GPU:
// what `validate` checks a pool's `mig { layout }` against and the planner
// counts a layout's instances by. The tables are NVIDIA's (the MIG user
// guide's profiles; the placements of go-nvml's mock GPUs, which for the
// H100, H200 and B200 differ from the A100's, and the memory check keeps
// the answers alike); a test holds them equal to the profiles of go-nvml's
// mock GPUs, which only tests and the agent import,
// so that the controller stays free of cgo.
package mig

import (
	"fmt"
	"slices"
	"strings"
)

// Placement is where a GPU instance may sit on its GPU: from memory slice
// Start, Size slices (NVML's nvmlGpuInstancePlacement_t).
type Placement struct {
	Start, Size int
}

// Profile is one GPU instance profile of a GPU model.
type Profile struct {
	// Name is NVIDIA's name, as `nvidia-smi mig -lgip` and Kubernetes'
	// resource names (nvidia.com/mig-3g.40gb) give it: compute slices,
	// then memory, "+me" for the profile with the media engines.
	Name string
	// ID is NVML's GPU instance profile ID (NVML_GPU_INSTANCE_PROFILE_*).
	ID int
	// Slices are its compute slices; Instances the most of it one GPU
	// holds; MemoryMB its memory.
	Slices, Instances, MemoryMB int
	// Placements are where it may sit.
	Placements []Placement
}

// Model is a GPU model with MIG.
type Model struct {
	// Name is how the project writes it (A100-80GB); Aliases the other
	// spellings a pool's gpu_model may use, compared by their letters and
	// digits alone, without regard to case (A100 SXM4 80GB).
	Name    string
	Aliases []string
	// MemoryMB is the GPU's memory.
	MemoryMB int
	Profiles []Profile
}

// The placements shared by the GPUs of eight memory slices.
var (
	oneOf7 = []Placement{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}
	twoOf8 = []Placement{{0, 2}, {2, 2}, {4, 2}}
)

// a100Profiles are the A100's profiles, named by its memory: 40 or 80 GB.
func a100Profiles(unit int, mem [5]int) []Profile {
	n := func(g, gb int) string { return fmt.Sprintf("%dg.%dgb", g, gb) }
	return []Profile{
		{Name: n(1, unit), ID: 0, Slices: 1, Instances: 7, MemoryMB: mem[0], Placements: oneOf7},
		{Name: n(1, unit) + "+me", ID: 7, Slices: 1, Instances: 1, MemoryMB: mem[0], Placements: oneOf7},
		{Name: n(1, 2*unit), ID: 9, Slices: 1, Instances: 4, MemoryMB: mem[1], Placements: []Placement{{0, 2}, {2, 2}, {4, 2}, {6, 2}}},
		{Name: n(2, 2*unit), ID: 1, Slices: 2, Instances: 3, MemoryMB: mem[1], Placements: twoOf8},
		{Name: n(3, 4*unit), ID: 2, Slices: 3, Instances: 2, MemoryMB: mem[2], Placements: []Placement{{0, 4}, {4, 4}}},
		{Name: n(4, 4*unit), ID: 3, Slices: 4, Instances: 1, MemoryMB: mem[3], Placements: []Placement{{0, 4}}},
		{Name: n(7, 8*unit), ID: 4, Slices: 7, Instances: 1, MemoryMB: mem[4], Placements: []Placement{{0, 8}}},
	}
}

// hopperProfiles are the profiles of the H100, H200 and B200, named by
// their memory (gb: 1g, 1g double, 3g, 7g), placed as go-nvml's mocks of
// them place them (the test holds them equal).
func hopperProfiles(gb [4]int, mem [5]int) []Profile {
	n := func(g, gb int) string { return fmt.Sprintf("%dg.%dgb", g, gb) }
	return []Profile{
		{Name: n(1, gb[0]), ID: 0, Slices: 1, Instances: 7, MemoryMB: mem[0], Placements: oneOf7},
		{Name: n(1, gb[0]) + "+me", ID: 7, Slices: 1, Instances: 1, MemoryMB: mem[0], Placements: oneOf7},
		{Name: n(1, gb[1]), ID: 9, Slices: 1, Instances: 4, MemoryMB: mem[1], Placements: oneOf7},
		{Name: n(2, gb[1]), ID: 1, Slices: 2, Instances: 3, MemoryMB: mem[1], Placements: twoOf8},
		{Name: n(3, gb[2]), ID: 2, Slices: 3, Instances: 2, MemoryMB: mem[2], Placements: []Placement{{0, 3}, {4, 3}}},
		{Name: n(4, gb[2]), ID: 3, Slices: 4, Instances: 1, MemoryMB: mem[3], Placements: []Placement{{0, 4}}},
		{Name: n(7, gb[3]), ID: 4, Slices: 7, Instances: 1, MemoryMB: mem[4], Placements: []Placement{{0, 7}}},
	}
}

// Models are the GPU models with MIG the project knows.
var Models = []Model{
	{Name: "A100-40GB", Aliases: []string{"A100-SXM4-40GB", "A100-PCIE-40GB"}, MemoryMB: 40960,
		Profiles: a100Profiles(5, [5]int{4864, 9856, 19968, 19968, 40192})},
	{Name: "A100-80GB", Aliases: []string{"A100-SXM4-80GB", "A100-PCIE-80GB"}, MemoryMB: 81920,
		Profiles: a100Profiles(10, [5]int{9856, 19968, 40192, 40192, 80384})},
	{Name: "A30", Aliases: []string{"A30-24GB", "A30-PCIE-24GB"}, MemoryMB: 24576, Profiles: []Profile{
		{Name: "1g.6gb", ID: 0, Slices: 1, Instances: 4, MemoryMB: 5836, Placements: []Placement{{0, 1}, {1, 1}, {2, 1}, {3, 1}}},
		{Name: "1g.6gb+me", ID: 7, Slices: 1, Instances: 1, MemoryMB: 5836, Placements: []Placement{{0, 1}, {1, 1}, {2, 1}, {3, 1}}},
		{Name: "2g.12gb", ID: 1, Slices: 2, Instances: 2, MemoryMB: 11672, Placements: []Placement{{0, 2}, {2, 2}}},
		{Name: "2g.12gb+me", ID: 8, Slices: 2, Instances: 1, MemoryMB: 11672, Placements: []Placement{{0, 2}, {2, 2}}},
		{Name: "4g.24gb", ID: 3, Slices: 4, Instances: 1, MemoryMB: 23344, Placements: []Placement{{0, 4}}},
	}},
	{Name: "H100-80GB", Aliases: []string{"H100", "H100-SXM5-80GB", "H100 80GB HBM3"}, MemoryMB: 81920,
		Profiles: hopperProfiles([4]int{10, 20, 40, 80}, [5]int{10240, 20480, 40960, 40960, 81920})},
	{Name: "H200-141GB", Aliases: []string{"H200", "H200-SXM5-141GB", "H200 141GB HBM3e"}, MemoryMB: 144384,
		Profiles: hopperProfiles([4]int{18, 35, 71, 141}, [5]int{18432, 35840, 72704, 72704, 144384})},
	{Name: "B200-180GB", Aliases: []string{"B200", "B200-SXM5-180GB", "B200 180GB HBM3e"}, MemoryMB: 184320,
		Profiles: hopperProfiles([4]int{23, 45, 90, 180}, [5]int{23552, 46080, 92160, 92160, 184320})},
}

// key is s by its letters and digits alone, lower case.
func key(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, s)
}

// Lookup is the model a pool's gpu_model names (its name or an alias), or
// an error saying why none: an A100 needs its memory named (40 or 80 GB
// profiles differ), and a model without MIG lists those with it.
func Lookup(gpuModel string) (*Model, error) {
	k := key(gpuModel)
	// As NVML names a GPU: "NVIDIA A100-SXM4-80GB" (a mock's "Mock NVIDIA ...").
	k = strings.TrimPrefix(strings.TrimPrefix(k, "mock"), "nvidia")
	for i := range Models {
		m := &Models[i]
		if key(m.Name) == k || slices.ContainsFunc(m.Aliases, func(a string) bool { return key(a) == k }) {
			return m, nil
		}
	}
	if k == "a100" {
		return nil, fmt.Errorf("gpu_model %q: an A100's MIG profiles depend on its memory: write A100-40GB or A100-80GB", gpuModel)
	}
	names := make([]string, len(Models))
	for i := range Models {
		names[i] = Models[i].Name
	}
	if gpuModel == "" {
		return nil, fmt.Errorf("a pool with MIG needs its gpu_model, one of %s", strings.Join(names, ", "))
	}
	return nil, fmt.Errorf("gpu_model %q has no MIG profiles the project knows; the GPUs with MIG are %s", gpuModel, strings.Join(names, ", "))
}

// Profile is the model's profile called name, or nil.
func (m *Model) Profile(name string) *Profile {
	for i := range m.Profiles {
		if strings.EqualFold(m.Profiles[i].Name, name) {
			return &m.Profiles[i]
		}
	}
	return nil
}

// ProfileByID is the model's profile of NVML's GPU instance profile ID
// id, or nil.
func (m *Model) ProfileByID(id int) *Profile {
	for i := range m.Profiles {
		if m.Profiles[i].ID == id {
			return &m.Profiles[i]
		}
	}
	return nil
}

// ProfileName is the name of the GPU instance profile id of the GPU NVML
// calls gpuName ("NVIDIA A100-SXM4-80GB", profile 2: "3g.40gb"); "" when
// the project does not know them.
func ProfileName(gpuName string, id int) string {
	m, err := Lookup(gpuName)
	if err != nil {
		return ""
	}
	if p := m.ProfileByID(id); p != nil {
		return p.Name
	}
	return ""
}

// profileNames are the model's profiles' names, for errors.
func (m *Model) profileNames() string {
	names := make([]string, len(m.Profiles))
	for i := range m.Profiles {
		names[i] = m.Profiles[i].Name
	}
	return strings.Join(names, ", ")
}

// Fit checks that one GPU of the model holds the layout, its GPU instances
// by profile name: each a profile of the model, no profile more times than
// the GPU holds it, their memory within the GPU's, and a placement for each
// that overlaps none of the others'. It returns what is wrong in words.
func (m *Model) Fit(layout []string) error {
	if len(layout) == 0 {
		return fmt.Errorf("an empty layout: name the GPU instances of each GPU, such as [\"3g.40gb\", \"3g.40gb\"]")
	}
	profiles := make([]*Profile, len(layout))
	count := map[*Profile]int{}
	mem, media := 0, 0
	for i, name := range layout {
		p := m.Profile(name)
		if p == nil {
			return fmt.Errorf("%q is no MIG profile of the %s; its profiles are %s", name, m.Name, m.profileNames())
		}
		// The GPU's media engines (JPEG, OFA) go to one "+me" instance.
		if strings.HasSuffix(p.Name, "+me") {
			if media++; media > 1 {
				return fmt.Errorf("two instances with the media engines (+me): one %s has them for one", m.Name)
			}
		}
		if count[p]++; count[p] > p.Instances {
			return fmt.Errorf("%d instances of %s: one %s holds at most %d", count[p], p.Name, m.Name, p.Instances)
		}
		profiles[i] = p
		mem += p.MemoryMB
	}
	if mem > m.MemoryMB {
		return fmt.Errorf("the instances need %d MB of memory; one %s has %d MB", mem, m.Name, m.MemoryMB)
	}
	// The widest first: fewer places to try.
	slices.SortStableFunc(profiles, func(a, b *Profile) int { return b.Placements[0].Size - a.Placements[0].Size })
	if !place(profiles, 0) {
		return fmt.Errorf("the instances %s do not fit on one %s together: no placement of each leaves the others room", strings.Join(layout, ", "), m.Name)
	}
	return nil
}

// place reports whether profiles can each take a placement that overlaps
// none of the slices in used (a bit per memory slice), by backtracking.
func place(profiles []*Profile, used uint64) bool {
	if len(profiles) == 0 {
		return true
	}
	for _, pl := range profiles[0].Placements {
		bits := (uint64(1)<<pl.Size - 1) << pl.Start
		if used&bits == 0 && place(profiles[1:], used|bits) {
			return true
		}
	}
	return false
}

// Count is how many instances of profile name the layout has.
func Count(layout []string, name string) int {
	n := 0
	for _, l := range layout {
		if strings.EqualFold(l, name) {
			n++
		}
	}
	return n
}
