package live

import "syscall"

// sysProcAttr kills a child if the benchmark dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
