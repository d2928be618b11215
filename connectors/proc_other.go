//go:build !linux

package connectors

import "os/exec"

// isolate: without Linux's parent-death signal, children are stopped on a
// clean shutdown only (stdin closed, then SIGTERM, then SIGKILL).
func isolate(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
