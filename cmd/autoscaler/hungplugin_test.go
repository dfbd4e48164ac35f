package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHungPluginStallsNoCycle: eight pools of a plugin whose listing
// hangs (the example plugin's list command sleeps; the plugin gives up
// after its 2 s timeout) beside a healthy plugin pool, with a cycle every
// 2 s. The pools are read at once, so a cycle waits for the slow plugin
// once, not once per pool: cycles keep coming (before, one took 16 s, so
// /healthz, which wants a cycle within three intervals, failed), and the
// healthy pool is read every cycle.
func TestHungPluginStallsNoCycle(t *testing.T) {
	dir := t.TempDir()
	bin, sum := commandsPlugin(t)
	script, err := filepath.Abs("../../examples/plugins/commands/racks.sh")
	if err != nil {
		t.Fatal(err)
	}
	racks := filepath.Join(dir, "racks")
	if err := os.MkdirAll(racks, 0o700); err != nil {
		t.Fatal(err)
	}
	sleep := "/bin/sleep"
	if _, err := os.Stat(sleep); err != nil {
		sleep = "/usr/bin/sleep"
	}
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, `
pool "hung-%d" {
  provider       = "plugin"
  plugin         = "hung"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 9.00
  lead_time      = "2m"
  max            = 4
}
`, i)
	}
	addr := freeAddr(t)
	fmt.Fprintf(&b, `
pool "racks" {
  provider       = "plugin"
  plugin         = "racks"
  instance_type  = "dgx-a100"
  gpus_per_node  = 8
  price_per_hour = 9.00
  lead_time      = "2m"
  max            = 4
  target {
    rack_dir = %q
  }
}
plugin "hung" {
  path   = %q
  sha256 = %q
  config {
    list_command      = [%q, "60"]
    launch_command    = [%q, "60"]
    terminate_command = [%q, "60"]
    timeout           = "2s"
  }
}
plugin "racks" {
  path   = %q
  sha256 = %q
  config {
    list_command      = [%q, "list"]
    launch_command    = [%q, "power-on"]
    terminate_command = [%q, "power-off"]
  }
}
forecast {
  step       = "1m"
  horizon    = "10m"
  hysteresis = "1m"
}
controller {
  interval  = "2s"
  listen    = %q
  state_dir = %q
}
`, racks, bin, sum, sleep, sleep, sleep, bin, sum, script, script, script, addr, filepath.Join(dir, "state"))
	conf := filepath.Join(dir, "fleet.hcl")
	if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ := startRunCLI(t, filepath.Join(dir, "run.log"), conf, addr, filepath.Join(dir, "state"))
	// Every failed read of a hung pool is counted; a cycle makes one per
	// pool. In 16 s, with a 2 s interval and a 2 s plugin timeout, cycles
	// that read the pools at once make about four; one after another, one.
	start := time.Now()
	errors := func() int {
		_, body := r.call("GET", "/metrics", "", "")
		m := regexp.MustCompile(`fleetcast_describe_errors_total\{pool="hung-0"\} (\d+)`).FindStringSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	first := errors()
	time.Sleep(16*time.Second - time.Since(start))
	if n := errors() - first; n < 3 {
		t.Errorf("%d cycles read the hung pools in 16 s with a 2 s interval; want 3 or more (a cycle waits for the hung plugin once, not once per pool)\n%s", n, r.output())
	}
	if code, body := r.call("GET", "/healthz", "", ""); code != http.StatusOK || !strings.Contains(body, "pool hung-0 not read") || strings.Contains(body, "pool racks not read") {
		t.Errorf("GET /healthz: %d %q; want 200, the hung pools not read and the healthy one read", code, body)
	}
}
