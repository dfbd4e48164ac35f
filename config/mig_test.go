package config_test

import (
	"reflect"
	"testing"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/providers/registry"
)

// TestParseMIG: a pool's GPUs are whole, or partitioned by MIG (mig {
// layout }), a layout of the pool's GPU model's profiles.
func TestParseMIG(t *testing.T) {
	src := simPool("whole", "") +
		simPool("mig", "  gpu_model = \"A100-80GB\"\n  mig {\n    layout = [\"3g.40gb\", \"3g.40gb\"]\n  }\n")
	cfg, diags := config.Parse("test.hcl", []byte(src), registry.Blocks())
	if diags.HasErrors() {
		t.Fatal(formatAll(diags))
	}
	if p := cfg.Pools; p[0].MIG != nil || !reflect.DeepEqual(p[1].MIG, []string{"3g.40gb", "3g.40gb"}) {
		t.Errorf("MIG layouts: %q, %q", p[0].MIG, p[1].MIG)
	}
}

// TestParseMIGErrors: a layout the GPU model cannot hold, or of a model
// without MIG, is refused at the layout, saying why; a pool has one mig
// block.
func TestParseMIGErrors(t *testing.T) {
	migOf := func(model, layout string) string {
		return "  gpu_model = \"" + model + "\"\n  mig {\n    layout = " + layout + "\n  }\n"
	}
	tests := []struct {
		name string
		src  string
		want []wantDiag
	}{
		{"a layout too big", simPool("a", migOf("A100-80GB", `["7g.80gb", "1g.10gb"]`)),
			[]wantDiag{{"Invalid value", "layout: the instances need 90240 MB of memory; one A100-80GB has 81920 MB.", `["7g.80gb"`, 0}}},
		{"placements that collide", simPool("a", migOf("A100-80GB", `["4g.40gb", "2g.20gb", "2g.20gb"]`)),
			[]wantDiag{{"Invalid value", "layout: the instances 4g.40gb, 2g.20gb, 2g.20gb do not fit on one A100-80GB together", `["4g.40gb"`, 0}}},
		{"another model's profile", simPool("a", migOf("A100-80GB", `["3g.20gb"]`)),
			[]wantDiag{{"Invalid value", `layout: "3g.20gb" is no MIG profile of the A100-80GB; its profiles are 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb.`, `["3g.20gb"]`, 0}}},
		{"an A100 of unnamed memory", simPool("a", migOf("A100", `["3g.40gb"]`)),
			[]wantDiag{{"Invalid value", `layout: gpu_model "A100": an A100's MIG profiles depend on its memory: write A100-40GB or A100-80GB.`, `["3g.40gb"]`, 0}}},
		{"a model without MIG", simPool("a", migOf("T4", `["1g.5gb"]`)),
			[]wantDiag{{"Invalid value", `layout: gpu_model "T4" has no MIG profiles the project knows`, `["1g.5gb"]`, 0}}},
		{"an empty layout", simPool("a", migOf("H100", `[]`)),
			[]wantDiag{{"Invalid value", `layout: an empty layout`, `[]`, 0}}},
		{"no layout", simPool("a", "  gpu_model = \"H100\"\n  mig {\n  }\n"),
			[]wantDiag{{"Missing required argument", `The argument "layout" is required, but no definition was found.`, "{\n  }", 0}}},
		{"two", simPool("a", migOf("H100", `["7g.80gb"]`)+"  mig {\n    layout = [\"7g.80gb\"]\n  }\n"),
			[]wantDiag{{"Duplicate mig block", `A mig block was already defined at test.hcl:`, "mig {", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErrors(t, tt.src, 0, tt.want, false) })
	}
}
