package badinput

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// marked is an error marked as bad input; its message is the wrapped error's.
type marked struct{ err error }

func (e marked) Error() string  { return e.err.Error() }
func (e marked) Unwrap() error  { return e.err }
func (e marked) BadInput() bool { return true }

// Mark returns err marked as bad input (nil stays nil). An error caused by the operating system (an
// *fs.PathError or a syscall.Errno in its chain: a read that failed, a permission) is returned as it is: the
// run failed reading the file, its contents were not found wrong.
func Mark(err error) error {
	if err == nil || Is(err) || isOS(err) {
		return err
	}
	return marked{err}
}

// Errorf is fmt.Errorf marked as bad input (see Mark).
func Errorf(format string, a ...any) error { return Mark(fmt.Errorf(format, a...)) }

// New is errors.New marked as bad input, for a sentinel error (errors.Is still matches it).
func New(text string) error { return marked{errors.New(text)} }

// Is reports whether an error in err's chain is marked as bad input: made by Mark, Errorf or New, or of a type
// with a method BadInput() bool that returns true.
func Is(err error) bool {
	var b interface{ BadInput() bool }
	return errors.As(err, &b) && b.BadInput()
}

// isOS reports whether err's chain holds an operating-system error.
func isOS(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}
