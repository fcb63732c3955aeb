package errctx_test

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tune-ml/tune/internal/errctx"
)

// The caller's context replaces the inner package prefix; errors.Is still reaches the cause.
func ExampleWrap() {
	inner := fmt.Errorf("loaders: dev.tsv: %w", fs.ErrNotExist)
	err := errctx.Wrap("recipes: data.train", inner)
	fmt.Println(err)
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	fmt.Println(errctx.Trim("recipes: lora: lora: r must be > 0"))
	// Output:
	// recipes: data.train: dev.tsv: file does not exist
	// true
	// r must be > 0
}
