package main

import "github.com/tune-ml/tune/recipes"

// copyTokenizer is recipes.CopyTokenizer: the tokenizer files a saved model directory carries.
func copyTokenizer(src, dir string) error { return recipes.CopyTokenizer(src, dir) }
