// Package transformertest holds the test helpers every model family shares: GradCheck (central differences of
// the loss against Backward's gradients, over a transformer.Model's named parameters) and Golden (a
// safetensors file of inputs and reference outputs written by a tools/reference script, skipped with the
// script's name until it exists), with CompareGrads, the per-tensor comparison against transformers' gradients
// and the autocast criterion the goldens share.
package transformertest
