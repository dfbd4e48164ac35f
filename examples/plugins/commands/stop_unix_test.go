//go:build unix

package main

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopKillsCommands: the commands still running when the plugin
// stops are killed, their children with them (the command's process
// group).
func TestStopKillsCommands(t *testing.T) {
	// A child in the background that would outlive its shell.
	slow := script(t, "/bin/sleep 30 &\n/bin/sleep 30")
	c, pool, _ := rack(t, map[string]string{"gpu-01": "on"}, map[string]any{"terminate_command": []any{slow}})
	done := make(chan error, 1)
	go func() { done <- c.Terminate(context.Background(), pool, []string{"gpu-01"}) }()
	pgid := 0
	for start := time.Now(); pgid == 0; time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		for pid := range c.groups {
			pgid = pid
		}
		c.mu.Unlock()
		if time.Since(start) > 5*time.Second {
			t.Fatal("the command never ran")
		}
	}
	time.Sleep(100 * time.Millisecond) // its child started
	c.stop()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a command killed at the plugin's stop: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the command outlived the plugin's stop")
	}
	for start := time.Now(); !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("process group %d (%s) still has processes after the plugin's stop", pgid, filepath.Base(slow))
		}
	}
}
