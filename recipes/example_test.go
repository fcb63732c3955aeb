package recipes_test

import (
	"errors"
	"fmt"

	"github.com/tune-ml/tune/recipes"
)

// Decoding is strict: an unknown key is named with the closest valid one, every invalid value is reported
// at once where it was written (a line, or the override), and each problem is a *Problem wrapping ErrInvalid.
func ExampleDecode() {
	typo := []byte(`model:
  path: checkpoints/bert-base-uncased
data:
  train: train.tsv
training:
  learnig_rate: 2e-5
`)
	_, err := recipes.Decode(typo, "x.yaml", "/work", nil)
	fmt.Println(err)

	bad := []byte(`model:
  path: checkpoints/bert-base-uncased
data:
  train: train.tsv
lora:
  r: 0
`)
	_, err = recipes.Decode(bad, "y.yaml", "/work", []string{"training.learning_rate=-1"})
	fmt.Println(err)
	var p *recipes.Problem
	fmt.Println(errors.As(err, &p), p.Key, errors.Is(err, recipes.ErrInvalid))
	// Output:
	// x.yaml:6: unknown key 'learnig_rate' in training; did you mean 'learning_rate'?
	// y.yaml:6: lora.r: must be > 0 (got 0)
	// override training.learning_rate=-1: training.learning_rate: must be > 0 (got -1)
	// true lora.r true
}
