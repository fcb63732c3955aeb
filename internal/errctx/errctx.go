package errctx

import (
	"fmt"
	"strings"
)

// packages are the prefixes ("loaders: ") Wrap removes from the front of a wrapped message: tune's packages.
var packages = []string{"amp", "atomicfile", "chat", "cuda", "generate", "hub", "loaders", "lora", "recipes", "sft", "tensor", "tokenizers", "trainer", "transformer"}

// wrapped is an error with a rewritten message that unwraps to the original.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// Wrap returns an error reading context + ": " + err's message with its leading package prefixes removed (see
// Trim), which unwraps to err; nil when err is nil. context starts with the caller's package ("recipes:
// data.train").
func Wrap(context string, err error) error {
	if err == nil {
		return nil
	}
	return &wrapped{msg: context + ": " + Trim(err.Error()), err: err}
}

// Wrapf is Wrap with the context formatted by fmt.Sprintf(format, a...).
func Wrapf(err error, format string, a ...any) error {
	return Wrap(fmt.Sprintf(format, a...), err)
}

// Trim returns msg without the package prefixes at its front ("loaders: lora: x" → "x").
func Trim(msg string) string {
	for {
		trimmed := false
		for _, p := range packages {
			if rest, ok := strings.CutPrefix(msg, p+": "); ok {
				msg, trimmed = rest, true
			}
		}
		if !trimmed {
			return msg
		}
	}
}
