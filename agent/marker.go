package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"
)

func (a *Agent) mark() error {
	if a.cfg.MarkerFile == "" {
		return nil
	}
	if err := os.WriteFile(a.cfg.MarkerFile, []byte(a.drain.ID+"\n"), 0o644); err != nil {
		return fmt.Errorf("drain marker: %w", err)
	}
	return nil
}

// hook runs the drain hook, without waiting for it (at most a minute);
// a.mu is held and a.drain set.
func (a *Agent) hook(what string) {
	if len(a.cfg.DrainHook) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, a.cfg.DrainHook[0], a.cfg.DrainHook[1:]...)
	cmd.Env = append(os.Environ(), "FLEETCAST_DRAIN="+what, "FLEETCAST_DRAIN_ID="+a.drain.ID)
	if err := cmd.Start(); err != nil {
		cancel()
		return
	}
	go func() { _ = cmd.Wait(); cancel() }()
}

func (a *Agent) unmark() {
	if a.cfg.MarkerFile != "" {
		_ = os.Remove(a.cfg.MarkerFile)
	}
}
