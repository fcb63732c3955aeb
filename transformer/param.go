package transformer

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/tune-ml/tune/tensor"
)

// Param is one FP32 master parameter. Value and Grad are views into the model's flat buffers: one allocation
// holds every trainable parameter (with a second, equally laid out, for their gradients) and another every frozen
// one, so zero-grad is one fill and AdamW is one fused call over the trainable buffer.
type Param struct {
	// Value is the FP32 master weight, in Hugging Face's shape (a Linear weight is (Out, In)).
	Value *tensor.Tensor
	// Grad is the FP32 gradient, accumulated (+=) by Backward; nil for a frozen parameter, which gets none.
	Grad *tensor.Tensor
	// Trainable is the wanted state. A module that creates a Param sets it; the model allocates Grad for it
	// when it packs its parameters (NewBertForSequenceClassification, ReplaceProjections, SetTrainable).
	Trainable bool
}

// Frozen reports whether p currently gets no gradient.
func (p *Param) Frozen() bool { return p.Grad == nil }

// NamedParameter is a parameter with its name relative to the module that lists it ("weight", "bias", or for a
// LoRA wrapper "base_layer.weight", "lora_A.default.weight").
type NamedParameter struct {
	Name  string // relative to the listing module; prefix it with the module's path for the full name
	Param *Param // the parameter itself (not a copy)
}

// AppendPrefixed appends list to ps with prefix (a module path and its dot, "attention.self.") before each
// name: how a module lists its submodules' parameters under their full names.
func AppendPrefixed(ps []NamedParameter, prefix string, list []NamedParameter) []NamedParameter {
	for _, np := range list {
		ps = append(ps, NamedParameter{Name: prefix + np.Name, Param: np.Param})
	}
	return ps
}

// noDecayPatterns are the lowercased-name patterns Hugging Face's Trainer excludes from weight decay
// (transformers 5.17 trainer.py get_decay_parameter_names; get_decay_parameter_names in transformers' trainer.py). A parameter inside an nn.LayerNorm is
// also excluded; every LayerNorm here is named "LayerNorm", which the "layernorm" pattern covers.
var noDecayPatterns = regexp.MustCompile(`bias|layernorm|rmsnorm|(^|\.)norm($|\.)|_norm($|\.)`)

// DecayApplies reports whether Hugging Face's Trainer applies weight decay to the parameter with this full name:
// false for every bias and every LayerNorm/RMSNorm/norm parameter, true otherwise (the embeddings included).
func DecayApplies(name string) bool { return !noDecayPatterns.MatchString(strings.ToLower(name)) }

// ParamGroups owns the flat buffers a model's parameters are views of: trainable values and their gradients
// (equal layout), frozen values, and frozen values stored in the autocast dtype. Every model family keeps one
// and calls Pack whenever its modules or their trainability change.
type ParamGroups struct {
	// B allocates the buffers.
	B tensor.Backend
	// Train, Grads and Frozen are 1-D F32 buffers (nil when the group is empty): trainable values, their
	// gradients, and frozen values.
	Train, Grads, Frozen *tensor.Tensor
	// Half is the 1-D buffer of the frozen parameters stored in the autocast dtype (F16 or BF16) instead of
	// FP32 (PackStored): no FP32 copy, no gradient, no optimizer state. nil when there are none.
	Half *tensor.Tensor
	// Segs are Train's contiguous ranges with their weight-decay flags (DecayApplies).
	Segs []tensor.Segment
}

// Pack lays the parameters of list out anew: trainable ones (p.Trainable) contiguous in list order in one
// buffer with a gradient buffer beside it, frozen ones in another. Values are copied into the new views and each
// Param's Value tensor is updated in place (so every holder of the *tensor.Tensor sees the move); gradients
// start at zero. Tensors that were not views of the previous flat buffers (a replacement module's freshly
// allocated weights) are freed after the copy. Segments group contiguous ranges by DecayApplies. Every
// parameter ends up F32 (a value stored in half is widened: its rounded value).
func (g *ParamGroups) Pack(list []NamedParameter) error { return g.pack(list, tensor.F32, nil, false) }

// PackStored is Pack with the frozen parameters for which store returns true kept in half (F16 or BF16) in the
// Half buffer: cast once here (rounded to nearest, exactly what the autocast weight cache would produce every
// step from the FP32 value) and read as they are by GEMM-class ops (Pass.Weight). half F32 (or store nil) is
// Pack. A value already stored in the other half dtype is an error: its FP32 value is gone.
func (g *ParamGroups) PackStored(list []NamedParameter, half tensor.DType, store func(*Param) bool) error {
	return g.pack(list, half, store, false)
}

// RepackFrozen is PackStored for the frozen parameters only: the trainable buffers, their gradients (and so
// an optimizer's references to them) are left exactly as they are.
func (g *ParamGroups) RepackFrozen(list []NamedParameter, half tensor.DType, store func(*Param) bool) error {
	return g.pack(list, half, store, true)
}

// HalfSlot returns the elements a tensor of n elements takes in the Half buffer: n rounded up to a multiple
// of 8, so that every stored weight starts 16-byte aligned as a separately allocated cast copy did (cuBLASLt
// chooses its fastest kernels only for 16-byte aligned operands).
func HalfSlot(n int) int { return (n + 7) &^ 7 }

// pack implements Pack, PackStored and RepackFrozen (frozenOnly).
func (g *ParamGroups) pack(list []NamedParameter, half tensor.DType, store func(*Param) bool, frozenOnly bool) error {
	if half == tensor.Invalid {
		half = tensor.F32
	}
	if half != tensor.F32 && half != tensor.F16 && half != tensor.BF16 {
		return fmt.Errorf("transformer: frozen parameters can be stored in F32, F16 or BF16, not %v", half)
	}
	inHalf := func(p *Param) bool { return half != tensor.F32 && !p.Trainable && store != nil && store(p) }
	seen := map[*Param]bool{}
	var nTrain, nFrozen, nHalf int
	for _, np := range list {
		p := np.Param
		if seen[p] {
			return fmt.Errorf("transformer: parameter %s is listed twice", np.Name)
		}
		seen[p] = true
		if p.Value == nil || !p.Value.DType.IsFloat() {
			return fmt.Errorf("transformer: parameter %s must be a float tensor, got %v", np.Name, p.Value)
		}
		if d := p.Value.DType; d != tensor.F32 && inHalf(p) && d != half {
			return fmt.Errorf("transformer: parameter %s is stored in %v and cannot be re-stored in %v (its FP32 value is "+
				"gone): reload the model", np.Name, d, half)
		}
		switch {
		case p.Trainable:
			nTrain += p.Value.Numel()
		case inHalf(p):
			nHalf += HalfSlot(p.Value.Numel())
		default:
			nFrozen += p.Value.Numel()
		}
	}
	if frozenOnly {
		nTrain = 0
	}
	alloc := func(dt tensor.DType, n int) (*tensor.Tensor, error) {
		if n == 0 {
			return nil, nil
		}
		t, err := g.B.Alloc(dt, n)
		if err != nil {
			return nil, fmt.Errorf("transformer: allocating %d parameters: %w", n, err)
		}
		return t, nil
	}
	var train, grads, frozen, halves *tensor.Tensor
	var err error
	if train, err = alloc(tensor.F32, nTrain); err == nil {
		if grads, err = alloc(tensor.F32, nTrain); err == nil {
			if frozen, err = alloc(tensor.F32, nFrozen); err == nil {
				halves, err = alloc(half, nHalf)
			}
		}
	}
	freeNew := func() {
		g.B.Free(train)
		g.B.Free(grads)
		g.B.Free(frozen)
		g.B.Free(halves)
	}
	if err != nil {
		freeNew()
		return err
	}
	var segs []tensor.Segment
	vals := make([]*tensor.Tensor, len(list))
	gradViews := make([]*tensor.Tensor, len(list))
	offT, offF, offH := 0, 0, 0
	for i, np := range list {
		p := np.Param
		shape := []int(p.Value.Shape)
		switch {
		case p.Trainable && frozenOnly:
			continue
		case p.Trainable:
			vals[i], _ = train.View(offT, shape...)
			gradViews[i], _ = grads.View(offT, shape...)
			n, decay := p.Value.Numel(), DecayApplies(np.Name)
			if k := len(segs); k > 0 && segs[k-1].Decay == decay {
				segs[k-1].Len += n
			} else {
				segs = append(segs, tensor.Segment{Offset: offT, Len: n, Decay: decay})
			}
			offT += n
		case inHalf(p):
			vals[i], _ = halves.View(offH, shape...)
			offH += HalfSlot(p.Value.Numel())
		default:
			vals[i], _ = frozen.View(offF, shape...)
			offF += p.Value.Numel()
		}
		if err := g.B.Cast(vals[i], p.Value); err != nil { // a Copy when the dtypes agree
			freeNew()
			return fmt.Errorf("transformer: packing parameter %s: %w", np.Name, err)
		}
	}
	// Every value is copied: release the old storage. Free is a no-op for views, so this releases exactly the
	// tensors a module allocated itself (the Alloc result owns its buffer) and the old flat buffers.
	for i, np := range list {
		if vals[i] != nil {
			g.B.Free(np.Param.Value)
		}
	}
	if !frozenOnly {
		g.B.Free(g.Train)
		g.B.Free(g.Grads)
	}
	g.B.Free(g.Frozen)
	g.B.Free(g.Half)
	for i, np := range list {
		if vals[i] == nil {
			continue
		}
		*np.Param.Value = *vals[i]
		np.Param.Grad = gradViews[i]
	}
	if !frozenOnly {
		g.Train, g.Grads, g.Segs = train, grads, segs
	}
	g.Frozen, g.Half = frozen, halves
	return nil
}
