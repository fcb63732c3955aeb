// Package probe looks inside a model's passes for the debugging commands: tune debug nan (per-module finite
// checks in forward and backward, the first module by Hugging Face name whose input, output or gradient turns
// non-finite, non-finite weights and bad data) and tune debug compare (each module's output and the logits in
// FP32 against FP16 and BF16 autocast, max and mean |FP32 − AMP|, and the dtype each op runs in).
//
// It works through the model contract only: transformer.ForwardOptions.Observe for the module outputs a model
// family reports (for BERT: bert.embeddings, bert.encoder.layer.i, bert.pooler, classifier) and, when the model
// is a transformer.Adaptable, a probe around every projection (query, key, value, the dense layers, the pooler,
// the classifier: what LoRA's target_modules name) put in place with ReplaceProjections, so a new model family
// gets the same checks without code here.
//
//	rep, err := probe.FindNaN(model, batches, probe.NaNOptions{Policy: amp.FP16, Scale: 65536})
//	rep.Write(os.Stdout)                       // weights, data, the trace and the first non-finite module
//	cmp, err := probe.Compare(model, batches, []amp.Policy{amp.FP16, amp.BF16})
//	cmp.Write(os.Stdout)                       // the per-module table, values above 1e-2 flagged
package probe
