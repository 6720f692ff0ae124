package pgtest

import "syscall"

// sysProcAttr runs the child as owner (nil: as we are) and sends it SIGQUIT
// (immediate shutdown) if the test process dies first, so a killed test
// leaves no server behind. The signal is tied to the forking OS thread;
// the Go runtime keeps threads alive, so in practice that is the process.
func sysProcAttr(owner *account) (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT}
	if owner != nil {
		attr.Credential = &syscall.Credential{Uid: owner.uid, Gid: owner.gid}
	}
	return attr, nil
}
