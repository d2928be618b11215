package connectors

import (
	"os/exec"
	"syscall"
)

// isolate puts the child in its own process group (so stopping it stops
// whatever it spawned) and has the kernel kill it if the bot dies, even by
// SIGKILL, so no server outlives the process that started it.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the child's whole process group.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
