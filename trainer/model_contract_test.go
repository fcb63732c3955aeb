package trainer_test

import (
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	"github.com/tune-ml/tune/transformer/bert"
	"github.com/tune-ml/tune/transformer/gpt2"
	"github.com/tune-ml/tune/transformer/llama"
)

// Every model family satisfies one contract: what the Trainer trains and resumes, what package lora adapts,
// gradient checkpointing and frozen half storage; the causal LMs also decode incrementally within a context
// limit. This fails to compile if a family stops satisfying any of it.
var (
	_ trainer.Model                    = (*bert.BertForSequenceClassification)(nil)
	_ trainer.Loader                   = (*bert.BertForSequenceClassification)(nil)
	_ transformer.Adaptable            = (*bert.BertForSequenceClassification)(nil)
	_ transformer.GradientCheckpointer = (*bert.BertForSequenceClassification)(nil)
	_ transformer.FrozenStorage        = (*bert.BertForSequenceClassification)(nil)

	_ trainer.Model                    = (*gpt2.GPT2LMHeadModel)(nil)
	_ trainer.Loader                   = (*gpt2.GPT2LMHeadModel)(nil)
	_ transformer.Adaptable            = (*gpt2.GPT2LMHeadModel)(nil)
	_ transformer.GradientCheckpointer = (*gpt2.GPT2LMHeadModel)(nil)
	_ transformer.FrozenStorage        = (*gpt2.GPT2LMHeadModel)(nil)
	_ transformer.IncrementalDecoder   = (*gpt2.GPT2LMHeadModel)(nil)
	_ transformer.ContextLimiter       = (*gpt2.GPT2LMHeadModel)(nil)

	_ trainer.Model                    = (*llama.ForCausalLM)(nil)
	_ trainer.Loader                   = (*llama.ForCausalLM)(nil)
	_ transformer.Adaptable            = (*llama.ForCausalLM)(nil)
	_ transformer.GradientCheckpointer = (*llama.ForCausalLM)(nil)
	_ transformer.FrozenStorage        = (*llama.ForCausalLM)(nil)
	_ transformer.IncrementalDecoder   = (*llama.ForCausalLM)(nil)
	_ transformer.ContextLimiter       = (*llama.ForCausalLM)(nil)
)
