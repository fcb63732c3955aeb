package transformer

import "github.com/tune-ml/tune/tensor"

// LayerScratch is the scratch every encoder Layer of one pass shares (attention scores, projections, the
// dense outputs and their gradients): one per model, laid out by LayoutLayerScratch.
type LayerScratch = layerScratch

// LayoutLayerScratch takes the shared layer scratch for a (b, t) pass of width c, intermediate size inter and
// heads heads in the GEMM dtype dt, for attention implementation impl (AttnSDPA or AttnEager).
func LayoutLayerScratch(a *Arena, impl string, b, t, c, inter, heads int, dt tensor.DType) LayerScratch {
	return layoutLayerScratch(a, impl, b, t, c, inter, heads, dt)
}

// Layout takes this layer's kept buffers for a (b, t) pass in the GEMM dtype dt with attention implementation
// impl (AttnSDPA or AttnEager).
func (l *Layer) Layout(a *Arena, sc *LayerScratch, impl string, b, t int, dt tensor.DType) {
	l.layout(a, sc, nil, impl, b, t, dt)
}

// Notify hands t, the output of module (or, with grad, the gradient with respect to it), to the pass's
// observer (ForwardOptions.Observe); a no-op without one. Model families call it at their module boundaries.
func (p *Pass) Notify(module string, grad bool, t *tensor.Tensor) error {
	return p.observe(module, grad, t)
}

// AlternateOutputs returns the two (N, C) F32 buffers the layers' outputs alternate between under autocast
// (nil under FP32). Without gradient checkpointing nothing reads them once the last layer's output has been
// consumed in the forward, so a model may use them for its backward's gradients; with checkpointing
// (LayoutLayers) they hold kept layer outputs.
func (sc *LayerScratch) AlternateOutputs() (*tensor.Tensor, *tensor.Tensor) {
	return sc.outs[0], sc.outs[1]
}
