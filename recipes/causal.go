package recipes

import (
	"github.com/tune-ml/tune/datasets"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/sft"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
	_ "github.com/tune-ml/tune/transformer/gpt2"  // registers model_type gpt2
	_ "github.com/tune-ml/tune/transformer/llama" // registers llama, qwen2, qwen3, mistral
)

// IsCausalLM reports whether the recipe trains a causal language model: model.path is a checkpoint whose
// config.json names a registered family other than BERT (llama, qwen2, qwen3, mistral, gpt2). Such a recipe
// reads its data as SFT JSONL (package sft) with the model's BPE tokenizer and chat template.
func (r *Recipe) IsCausalLM() bool {
	if r.Model.Path == "" {
		return false
	}
	f, err := transformer.Lookup(r.Model.Path)
	return err == nil && f.Name != "bert"
}

// TrainLen is the number of training examples (rows, for packed SFT data); 0 without a training set.
func (run *Run) TrainLen() int {
	switch {
	case run.Train != nil:
		return run.Train.Len()
	case run.SFTTrain != nil:
		return run.SFTTrain.Len()
	}
	return 0
}

// EvalLen is the number of evaluation examples (rows); 0 without an eval set.
func (run *Run) EvalLen() int {
	switch {
	case run.Eval != nil:
		return run.Eval.Len()
	case run.SFTEval != nil:
		return run.SFTEval.Len()
	}
	return 0
}

// HasEval reports whether the run has an eval set.
func (run *Run) HasEval() bool { return run.Eval != nil || run.SFTEval != nil }

// buildCausalLM is Build for a causal LM: the tokenizer as transformers' AutoTokenizer builds it, the chat
// template when the tokenizer has one, the model through the registry, LoRA, and the SFT data of data.train and
// data.eval (TRL's formats; data.max_length, data.packing, data.assistant_only_loss,
// data.completion_only_loss, data.dataset_text_field). Evaluation reports eval_loss (the mean token loss).
func buildCausalLM(r *Recipe, b tensor.Backend, opts ...trainer.Option) (*Run, error) {
	run := &Run{Recipe: r, Backend: b}
	tk, err := loadSFTTokenizer(r)
	if err != nil {
		return nil, err
	}
	base, report, err := transformer.Open(r.Model.Path, b, transformer.LoadOptions{})
	if err != nil {
		return nil, errctx.Wrap("recipes: model.path", err)
	}
	run.addNotices(report, r.Model.Path)
	run.Causal, run.Model = base, base
	if r.LoRA != nil {
		lm, err := lora.Apply(base, *r.LoRA, seed(r))
		if err != nil {
			return nil, loraError(r, err)
		}
		if lm.BaseModelNameOrPath, err = r.BaseModelNameOrPath(); err != nil {
			return nil, errctx.Wrap("recipes: model.path", err)
		}
		run.Notices = append(run.Notices, lm.Warnings...)
		run.Model = lm
	}
	d := r.Data
	so := sft.Options{MaxLength: d.MaxLength, Packing: d.Packing, AssistantOnlyLoss: d.AssistantOnlyLoss,
		CompletionOnlyLoss: d.CompletionOnlyLoss, DatasetTextField: d.DatasetTextField}
	load := func(key, path string) (*datasets.SFT, error) {
		if path == "" {
			return nil, nil
		}
		ds, err := datasets.LoadSFT(path, tk, so)
		if err != nil {
			return nil, errctx.Wrap("recipes: "+key, err)
		}
		run.Notices = append(run.Notices, ds.Summary())
		return ds, nil
	}
	if run.SFTTrain, err = load("data.train", d.Train); err != nil {
		return nil, err
	}
	if run.SFTEval, err = load("data.eval", d.Eval); err != nil {
		return nil, err
	}
	var train, eval trainer.Dataset
	if run.SFTTrain != nil {
		train = run.SFTTrain
	}
	if run.SFTEval != nil {
		eval = run.SFTEval
	}
	// No per-token logits are gathered for metrics: a causal LM's (B, T, V) logits of a whole eval set do not fit.
	opts = append(opts, trainer.WithComputeMetrics(nil))
	if run.Trainer, err = trainer.New(run.Model, r.Training, train, eval, opts...); err != nil {
		return nil, err
	}
	return run, nil
}
