package trainer_test

import (
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// The BERT model is what the Trainer trains; this fails to compile if it stops satisfying the contract.
var (
	_ trainer.Model  = (*transformer.BertForSequenceClassification)(nil)
	_ trainer.Loader = (*transformer.BertForSequenceClassification)(nil)
)
