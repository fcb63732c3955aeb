package lora

import "github.com/tune-ml/tune/trainer"

// The adapted model is what the Trainer trains and resumes (lora does not import trainer; this checks the method
// sets agree).
var (
	_ trainer.Model  = (*Model)(nil)
	_ trainer.Loader = (*Model)(nil)
	_ trainer.Model  = Base(nil)
)
