//go:build unix

package dist

import "syscall"

// ownGroup starts a rank in its own process group, so a terminal's Ctrl-C reaches it only through Launch.
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
