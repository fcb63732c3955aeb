//go:build !unix

package dist

import "syscall"

// ownGroup keeps the default process attributes where process groups do not exist.
func ownGroup() *syscall.SysProcAttr { return nil }
