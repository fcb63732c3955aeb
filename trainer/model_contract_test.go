package trainer_test

import (
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer/bert"
)

// The BERT model is what the Trainer trains; this fails to compile if it stops satisfying the contract.
var (
	_ trainer.Model  = (*bert.BertForSequenceClassification)(nil)
	_ trainer.Loader = (*bert.BertForSequenceClassification)(nil)
)
