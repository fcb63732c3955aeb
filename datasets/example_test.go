package datasets_test

import (
	"fmt"
	"path/filepath"

	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/loaders"
)

// Read the bundled tiny training file with its tokenizer, as the tiny recipe does, and collate a batch: what
// trainer.New takes as its training set (a *datasets.Text is a trainer.Dataset), with no recipe involved.
func Example() {
	dir := filepath.Join("..", "recipes", "data", "tiny")
	tok, err := loaders.LoadTokenizer(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	train, err := datasets.LoadText(filepath.Join(dir, "train.tsv"), tok, datasets.TextOptions{MaxLength: 64})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := train.Batch([]int{0, 1, 2, 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(train.Len(), "examples, labels", train.LabelNames)
	// trainer.New(model, args, train, eval) trains on it.
	fmt.Printf("batch %dx%d, labels %v\n", b.B, b.T, b.Labels)

	// Output:
	// 4000 examples, labels [0 1]
	// batch 4x13, labels [1 0 0 0]
}
