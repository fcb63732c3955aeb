package bench

import (
	"fmt"
	"strings"

	"github.com/tune-ml/tune/lora"
	"github.com/tune-ml/tune/transformer/bert"
)

// FLOPs is the floating-point work of one training step, GEMMs only (a multiply-add counts 2), split by pass.
// Elementwise ops, LayerNorm, softmax, the loss and AdamW are left out: together they are well under 1% of a
// BERT step's FLOPs, and they are bound by memory bandwidth, not arithmetic.
type FLOPs struct {
	// Forward is every GEMM of the forward pass: the projections, LoRA's A and B products, QKᵀ and P·V.
	Forward float64
	// BackwardData is every input (activation) gradient: dX of every projection, frozen ones included (the
	// gradient must flow through them), the adapters' two data-gradient products, and both gradients of QKᵀ
	// and P·V.
	BackwardData float64
	// BackwardWeight is the weight gradient of every trainable projection weight (dW = dYᵀ·X) and of the LoRA
	// adapters (dA, dB). A frozen weight has no weight-gradient GEMM: this, not the adapter math, is where LoRA
	// saves work.
	BackwardWeight float64
}

// Total returns Forward + BackwardData + BackwardWeight.
func (f FLOPs) Total() float64 { return f.Forward + f.BackwardData + f.BackwardWeight }

// Projection is one Linear layer as the FLOP count sees it: Rows input rows (B·T for the encoder's projections,
// B for the pooler and the classifier) of In features mapped to Out features, whether the dense weight is
// trained, the LoRA rank (0 without an adapter) and whether the adapter trains.
type Projection struct {
	Path         string // the module path: "bert.encoder.layer.0.attention.self.query"
	Rows         int    // input rows per step: B·T, or B for the pooler and classifier
	In, Out      int    // in_features and out_features
	TrainWeight  bool   // the dense weight trains, so backward has its weight-gradient GEMM
	Bias         bool   // the Linear has a bias
	LoRARank     int    // r of the LoRA adapter on it; 0 without one
	TrainAdapter bool   // the adapter's A or B trains (they have weight-gradient GEMMs)
	// NoInputGrad: no one reads the input's gradient (BERT's first-layer query, key and value over frozen
	// embeddings), so neither the dense dX nor the adapter's dX += dH·A is formed.
	NoInputGrad bool
}

// projectionFLOPs adds one projection's work to f:
//
//	forward  2·rows·in·out            + adapter 2·rows·r·(in + out)
//	dX       2·rows·in·out            + adapter 2·rows·r·(in + out)   (dH = dY·B, dX += dH·A)
//	dW       2·rows·in·out if trained + adapter 2·rows·r·(in + out)   (dB = dYᵀ·H, dA = dHᵀ·X)
//
// With NoInputGrad the dX row keeps only the adapter's dH = dY·B (2·rows·r·out).
func (f *FLOPs) add(p Projection) {
	dense := 2 * float64(p.Rows) * float64(p.In) * float64(p.Out)
	adapter := 2 * float64(p.Rows) * float64(p.LoRARank) * float64(p.In+p.Out)
	f.Forward += dense + adapter
	f.BackwardData += dense + adapter
	if p.NoInputGrad {
		f.BackwardData -= dense + 2*float64(p.Rows)*float64(p.LoRARank)*float64(p.In)
	}
	if p.TrainWeight {
		f.BackwardWeight += dense
	}
	if p.TrainAdapter {
		f.BackwardWeight += adapter
	}
}

// modelShape is what the FLOP count needs of a model beyond its projections: L layers whose attention is
// attnWidth = H·D wide (causal or not), and a causal LM's head (V × C, 0 for a classifier; headTrained when its
// weight trains).
type modelShape struct {
	layers, attnWidth int
	causal            bool
	headV, headC      int
	headTrained       bool
	// firstNoInputGrad: BERT over frozen embeddings, whose first layer's query, key and value form no input
	// gradient (Projection.NoInputGrad).
	firstNoInputGrad bool
}

// attentionFLOPs adds the two attention products of every layer: per sequence and layer QKᵀ is H products of
// (T, D)·(D, T) and P·V is H products of (T, T)·(T, D), each 2·T²·D·H = 2·T²·C FLOPs, so the forward is
// 4·B·L·T²·C; the backward computes two gradients of each product (dQ, dK; dP, dV), 8·B·L·T²·C. None of them
// has a weight. Causal attention computes only the scores at or below the diagonal, half of them (the
// convention of FlashAttention's benchmarks), so a decoder counts half of each.
func (f *FLOPs) attention(sh modelShape, b, t int) {
	fwd := 4 * float64(b) * float64(sh.layers) * float64(t) * float64(t) * float64(sh.attnWidth)
	if sh.causal {
		fwd /= 2
	}
	f.Forward += fwd
	f.BackwardData += 2 * fwd
}

// head adds a causal LM's lm_head over every position: 2·B·T·C·V forward, the same for the input gradient, and
// again for the weight gradient when the (possibly tied) weight trains. The chunked head's recomputation of the
// logits in backward is not counted (it is the implementation's, not the model's, work).
func (f *FLOPs) head(sh modelShape, b, t int) {
	f.add(Projection{Rows: b * t, In: sh.headC, Out: sh.headV, TrainWeight: sh.headTrained})
}

// Projections lists the projections of m (a BertForSequenceClassification or a causal LM, or one adapted by
// lora.Apply) for a (b, t) batch: BERT's six per layer over B·T rows, its pooler and classifier over B rows (the
// pooler reads the first token only), a decoder's seven per layer over B·T rows, with their trainability and LoRA rank as m has them now.
func Projections(m lora.Base, b, t int) ([]Projection, error) {
	var out []Projection
	for _, mp := range m.Projections() {
		lin := mp.Projection.Base()
		if lin == nil || lin.Weight == nil {
			return nil, fmt.Errorf("bench: projection %s has no weight", mp.Path)
		}
		p := Projection{Path: mp.Path, Rows: b * t, In: lin.In, Out: lin.Out, TrainWeight: lin.Weight.Grad != nil,
			Bias: lin.Bias != nil}
		if strings.HasPrefix(mp.Path, "bert.pooler.") || mp.Path == "classifier" {
			p.Rows = b // BERT's pooler reads the first token only
		}
		if l, ok := mp.Projection.(*lora.Linear); ok && !l.Merged() {
			p.LoRARank = l.R
			p.TrainAdapter = l.A.Grad != nil || l.B.Grad != nil
		}
		out = append(out, p)
	}
	return out, nil
}

// CountFLOPs returns the GEMM work of one training step of m on a (b, t) batch: the sum over Projections(m) of
// each projection's forward, input-gradient and (where trained) weight-gradient products, plus the attention
// products. For BERT fully fine-tuned this is the closed form
//
//	6·B·T·L·(4C² + 2C·I) + 6·B·(C² + C·K) + 12·B·L·T²·C
//
// (L layers, hidden size C, intermediate size I, K labels), i.e. 6 FLOPs per token per matmul weight plus
// 12·L·T²·C per sequence of attention. With LoRA rank r on the query and value projections and only the
// adapters and the classifier trained, the frozen dense weights lose their weight-gradient GEMM:
//
//	4·B·T·L·(4C² + 2C·I) + 4·B·C² + 6·B·C·K + 12·B·L·T²·C + 24·B·T·L·r·C
//
// where the last term is the two adapters' A and B products (2·r·(C + C) per token each, in each of the three
// passes).
// Over frozen embeddings (LoRA) the first layer's query, key and value form no input gradient (no one reads
// it; PyTorch's autograd skips it too), which takes 6·B·T·C² + 4·B·T·r·C off the LoRA count above.
func CountFLOPs(m lora.Base, cfg bert.BertConfig, b, t int) (FLOPs, error) {
	frozen := true
	for _, np := range m.NamedParameters() {
		if strings.HasPrefix(np.Name, "bert.embeddings.") && np.Trainable {
			frozen = false
		}
	}
	return countFLOPs(m, modelShape{layers: cfg.NumHiddenLayers, attnWidth: cfg.HiddenSize, firstNoInputGrad: frozen}, b, t)
}

// countFLOPs is CountFLOPs for any model shape; a causal LM adds its head (modelShape.head).
func countFLOPs(m lora.Base, sh modelShape, b, t int) (FLOPs, error) {
	projs, err := Projections(m, b, t)
	if err != nil {
		return FLOPs{}, err
	}
	var f FLOPs
	for _, p := range projs {
		if sh.firstNoInputGrad && strings.HasPrefix(p.Path, "bert.encoder.layer.0.attention.self.") {
			p.NoInputGrad = true
		}
		f.add(p)
	}
	f.attention(sh, b, t)
	if sh.headV > 0 {
		f.head(sh, b, t)
	}
	return f, nil
}

// countFLOPs counts one step of s's model m: CountFLOPs for a BERT; for a causal LM the decoder layers'
// projections over B·T rows, causal attention over Hq·D and the LM head.
func (s *Spec) countFLOPs(m trainee) (FLOPs, error) {
	if s.Decoder == nil {
		return CountFLOPs(m, s.Config, s.Batch, s.Seq)
	}
	sh := decoderShape(s.Decoder)
	sh.headTrained = headTrained(m, s.Decoder)
	return countFLOPs(m, sh, s.Batch, s.Seq)
}
