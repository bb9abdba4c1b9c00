package proc

import "syscall"

// sysProcAttr kills a child if this process dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
