package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fleetcast/autoscaler/config"
	"github.com/fleetcast/autoscaler/fleet"
	"github.com/fleetcast/autoscaler/providers"
)

// TestProviders: every provider name the vocabulary has is registered
// once, with a decoder, and this build drives every one of them.
func TestProviders(t *testing.T) {
	var names, driven []string
	for _, p := range Providers() {
		if p.Decode == nil {
			t.Errorf("provider %s has no block decoder", p.Name)
		}
		names = append(names, p.Name)
		if p.drivable() {
			driven = append(driven, p.Name)
		}
	}
	slices.Sort(names)
	if want := []string{fleet.ProviderAWS, fleet.ProviderGCP, fleet.ProviderPlugin, fleet.ProviderSim}; !slices.Equal(names, want) {
		t.Errorf("providers %v, want %v", names, want)
	}
	if want := []string{fleet.ProviderAWS, fleet.ProviderGCP, fleet.ProviderPlugin, fleet.ProviderSim}; !slices.Equal(driven, want) {
		t.Errorf("driven %v, want %v", driven, want)
	}
	if len(Blocks()) != len(names) {
		t.Errorf("%d blocks for %d providers", len(Blocks()), len(names))
	}
}

// TestCheck: Check refuses a pool of a provider this build does not know,
// naming it and its provider, and a mix of simulated and real pools; Open
// refuses what Check refuses before it makes anything.
func TestCheck(t *testing.T) {
	pool := func(name, provider string) fleet.Pool { return fleet.Pool{Name: name, Provider: provider} }
	for _, tt := range []struct {
		name  string
		pools []fleet.Pool
		err   string // a fragment of the error, or "" for none
	}{
		{"aws", []fleet.Pool{pool("a", fleet.ProviderAWS), pool("b", fleet.ProviderAWS)}, ""},
		{"sim", []fleet.Pool{pool("a", fleet.ProviderSim)}, ""},
		{"none", nil, ""},
		{"plugin and aws", []fleet.Pool{pool("rack", fleet.ProviderPlugin), pool("b", fleet.ProviderAWS)}, ""},
		{"plugin and sim", []fleet.Pool{pool("rack", fleet.ProviderPlugin), pool("b", fleet.ProviderSim)}, `a config's pools are all simulated or all real`},
		{"unknown", []fleet.Pool{pool("x", "azure")}, `pool x uses provider "azure"`},
		{"mixed", []fleet.Pool{pool("a", fleet.ProviderSim), pool("b", fleet.ProviderAWS)}, `pool a uses provider "sim" and pool b "aws": a config's pools are all simulated or all real`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(&config.Config{Pools: tt.pools})
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Check: %v, want %q", err, tt.err)
			}
			if clouds, err := Open(context.Background(), Env{}, tt.pools); err == nil || clouds != nil {
				t.Errorf("Open made %v, %v; want Check's error", clouds, err)
			}
		})
	}
	if !Simulated([]fleet.Pool{pool("a", fleet.ProviderSim)}) || Simulated([]fleet.Pool{pool("a", fleet.ProviderAWS)}) || Simulated(nil) {
		t.Error("Simulated is wrong")
	}
}

// TestPlaced: what a cloud says the config got wrong is an error at the
// attribute it names (at the pool's block when the file leaves the
// attribute to its default), alone or joined with other errors, which
// are kept; an error with none is left as it is.
func TestPlaced(t *testing.T) {
	src := "pool \"a\" {\n  provider = \"gcp\"\n  instance_type = \"a2\"\n  gpus_per_node = 8\n  price_per_hour = 1\n  max = 2\n  gcp {\n    project = \"p\"\n    zone = \"z\"\n    mig = \"m\"\n  }\n}\n"
	cfg, diags := config.Parse("f.hcl", []byte(src), Blocks())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	other := errors.New("unreachable")
	gpus := &providers.ConfigError{Pool: "a", Attr: "gpus_per_node", Err: errors.New("pool a: gpus_per_node is 8, but its VMs have 4 GPUs")}
	mig := &providers.ConfigError{Pool: "a", Attr: "gcp.mig", Err: errors.New("pool a: no such group")}
	capacity := &providers.ConfigError{Pool: "a", Attr: "capacity", Err: errors.New("pool a: capacity is on_demand, but its VMs are spot")}
	for _, tt := range []struct {
		name  string
		err   error
		lines []int // of the diagnostics, in order
		rest  bool  // other's kept
	}{
		{"none", other, nil, true},
		{"one", gpus, []int{4}, false},
		{"nested block", fmt.Errorf("opening: %w", mig), []int{10}, false},
		{"default", errors.Join(errors.Join(capacity, nil), other), []int{1}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := placed(tt.err, cfg.Origin)
			var de *DiagnosticsError
			errors.As(got, &de)
			var lines []int
			if de != nil {
				for _, d := range de.Diags {
					lines = append(lines, d.Subject.Start.Line)
				}
			}
			if !slices.Equal(lines, tt.lines) || errors.Is(got, other) != tt.rest {
				t.Errorf("placed(%v) = %v: lines %v, want %v (other kept: %v)", tt.err, got, lines, tt.lines, tt.rest)
			}
		})
	}
}
