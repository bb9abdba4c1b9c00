package simproc

import "syscall"

// sysProcAttr kills the simulator if the test process dies without cleanup.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
