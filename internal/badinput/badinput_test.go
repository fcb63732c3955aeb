package badinput

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/tune-ml/tune/internal/errctx"
)

type selfMarked struct{ bad bool }

func (e selfMarked) Error() string  { return "self" }
func (e selfMarked) BadInput() bool { return e.bad }

func TestMarkSurvivesWrapping(t *testing.T) {
	err := Errorf("loaders: %s:%d: 1 columns, expected 2", "s.tsv", 3)
	if err.Error() != "loaders: s.tsv:3: 1 columns, expected 2" {
		t.Errorf("message %q", err)
	}
	for _, w := range []error{err, fmt.Errorf("recipes: data.train: %w", err), errctx.Wrap("recipes: data.train", err)} {
		if !Is(w) {
			t.Errorf("%q: not bad input after wrapping", w)
		}
	}
	if Is(fmt.Errorf("x: %v", err)) {
		t.Errorf("a %%v wrap drops the chain, and with it the mark")
	}
	if Is(nil) || Is(errors.New("disk on fire")) || Mark(nil) != nil {
		t.Error("an unmarked error or nil is bad input")
	}
}

func TestSentinelsAndTypes(t *testing.T) {
	sentinel := New("tensor shapes differ")
	wrapped := fmt.Errorf("loaders: x: %w", sentinel)
	if !errors.Is(wrapped, sentinel) || !Is(wrapped) {
		t.Error("a sentinel from New is matched by errors.Is and is bad input")
	}
	if !Is(fmt.Errorf("a: %w", selfMarked{true})) || Is(selfMarked{false}) {
		t.Error("a type's BadInput method decides")
	}
}

func TestOSErrorsAreNotBadInput(t *testing.T) {
	_, err := os.Open("/nonexistent/x.tsv")
	if Is(Mark(err)) || Is(Errorf("loaders: reading: %w", err)) {
		t.Error("an operating-system error is a failure of the run, not bad input")
	}
	if !errors.Is(Mark(err), fs.ErrNotExist) {
		t.Error("Mark changed an OS error")
	}
}
