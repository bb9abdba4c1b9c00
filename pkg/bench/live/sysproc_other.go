//go:build !linux

package live

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
