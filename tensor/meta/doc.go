// Package meta is a backend that allocates no memory and computes nothing, for counting what a model would
// hold before building it for real (as PyTorch's "meta" device). Alloc hands out tensors whose buffer has a
// length and no storage; Upload, Fill, Copy, Cast and Scale accept them and do nothing; every other op
// refuses. The backend counts the bytes of its live tensors and their peak, so a model, its LoRA adapters and
// its optimizer can be built on it and measured at any size — a 70B-parameter configuration costs its
// parameter list, not its parameters:
//
//	mb := meta.New(cuda)                        // stands in for cuda (AttnChoice probes run there)
//	m, _ := llama.New(mb, cfg, seed)            // no weights drawn: tensor.IsMeta(mb)
//	opt, _ := trainer.NewAdamW(m, 0.9, 0.999, 1e-8, 0)
//	fmt.Println(mb.Bytes())                     // weights + gradients + moments
//
// Models skip work whose result nobody can read on it (drawing initial weights) by asking tensor.IsMeta.
package meta
