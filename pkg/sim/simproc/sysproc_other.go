//go:build !linux

package simproc

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
