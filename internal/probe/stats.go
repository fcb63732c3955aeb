package probe

import (
	"fmt"
	"math"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// The kinds of tensor a Stat describes.
const (
	KindInput     = "input"      // a projection's input (forward)
	KindOutput    = "output"     // a module's output (forward)
	KindGrad      = "grad"       // the gradient with respect to a module's output (backward)
	KindGradInput = "grad input" // the gradient a projection passes to its input (backward)
	KindWeight    = "weight"     // a parameter's value
	KindParamGrad = "param grad" // a parameter's gradient after backward (scaled by the loss scale)
)

// Stat summarises one tensor: where it was seen, its dtype, its non-finite elements and its largest finite
// magnitude (how close it is to FP16's 65504).
type Stat struct {
	Module string       // Hugging Face module path, or the parameter name for KindWeight/KindParamGrad
	Kind   string       // KindInput, KindOutput, KindGrad, KindGradInput, KindWeight or KindParamGrad
	DType  tensor.DType // the tensor's dtype: what the op producing it ran in
	Shape  tensor.Shape // the tensor's shape
	NaN    int          // NaN elements
	Inf    int          // ±Inf elements
	First  int          // flat index of the first non-finite element, -1 when none
	Value  float32      // that element
	MaxAbs float64      // the largest finite |x|
}

// NonFinite reports whether the tensor held an inf or NaN.
func (s Stat) NonFinite() bool { return s.NaN+s.Inf > 0 }

// Where names the tensor: "output of bert.encoder.layer.1".
func (s Stat) Where() string {
	switch s.Kind {
	case KindWeight:
		return "the weights " + s.Module
	case KindParamGrad:
		return "the gradient of " + s.Module
	case KindGrad:
		return "the gradient of the output of " + s.Module
	case KindGradInput:
		return "the gradient of the input of " + s.Module
	}
	return "the " + s.Kind + " of " + s.Module
}

// Describe reads "NaN ×3, +Inf ×1 (first at 17: NaN)", or "finite".
func (s Stat) Describe() string {
	if !s.NonFinite() {
		return "finite"
	}
	d := ""
	if s.NaN > 0 {
		d = fmt.Sprintf("NaN ×%d", s.NaN)
	}
	if s.Inf > 0 {
		if d != "" {
			d += ", "
		}
		d += fmt.Sprintf("Inf ×%d", s.Inf)
	}
	return fmt.Sprintf("%s of %d (first at %d: %v)", d, s.Shape.Numel(), s.First, s.Value)
}

// statOf downloads t and summarises it.
func statOf(b tensor.Backend, module, kind string, t *tensor.Tensor) (Stat, []float32, error) {
	host := make([]float32, t.Numel())
	if err := b.Download(host, t); err != nil {
		return Stat{}, nil, fmt.Errorf("probe: reading %s of %s: %w", kind, module, err)
	}
	s := Stat{Module: module, Kind: kind, DType: t.DType, Shape: append(tensor.Shape(nil), t.Shape...), First: -1}
	for i, x := range host {
		switch {
		case math.IsNaN(float64(x)):
			s.NaN++
		case math.IsInf(float64(x), 0):
			s.Inf++
		default:
			s.MaxAbs = math.Max(s.MaxAbs, math.Abs(float64(x)))
			continue
		}
		if s.First < 0 {
			s.First, s.Value = i, x
		}
	}
	return s, host, nil
}

// recorder collects the Stats of a pass, in execution order, from the model's Observer and the projection
// probes; keep also holds a host copy of every observed module output (for Compare).
type recorder struct {
	b      tensor.Backend
	stats  []Stat
	keep   bool
	values map[string][]float32 // module → output values (keep)
	dtypes map[string]tensor.DType
	probes bool // record the projection probes too (false: only the Observer's modules)
}

// record summarises t.
func (r *recorder) record(module, kind string, t *tensor.Tensor) error {
	s, host, err := statOf(r.b, module, kind, t)
	if err != nil {
		return err
	}
	r.stats = append(r.stats, s)
	if r.keep && kind == KindOutput {
		r.values[module], r.dtypes[module] = host, t.DType
	}
	return nil
}

// observer is the transformer.Observer feeding r.
func (r *recorder) observer() transformer.Observer {
	return func(module string, grad bool, t *tensor.Tensor) error {
		kind := KindOutput
		if grad {
			kind = KindGrad
		}
		if n := len(r.stats); n > 0 && r.stats[n-1].Module == module && r.stats[n-1].Kind == kind && !r.keep {
			return nil // the projection probe of the same module (the classifier) just recorded it
		}
		return r.record(module, kind, t)
	}
}

// reset empties r for the next pass.
func (r *recorder) reset() {
	r.stats = r.stats[:0]
	r.values, r.dtypes = map[string][]float32{}, map[string]tensor.DType{}
}

// projectionProbe wraps a projection and records its input and output in Forward and the gradients in
// Backward; everything else (Layout, Base, Parameters) is the wrapped projection's.
type projectionProbe struct {
	transformer.Projection
	path string
	rec  *recorder
}

// Forward records the input, runs the projection and records its output.
func (p *projectionProbe) Forward(ps *transformer.Pass, out, in *tensor.Tensor) error {
	if p.rec.probes {
		if err := p.rec.record(p.path, KindInput, in); err != nil {
			return err
		}
	}
	if err := p.Projection.Forward(ps, out, in); err != nil {
		return err
	}
	if !p.rec.probes {
		return nil
	}
	return p.rec.record(p.path, KindOutput, out)
}

// Backward records the output's gradient, runs the projection's backward and records the input's gradient.
func (p *projectionProbe) Backward(ps *transformer.Pass, dIn, dOut, in *tensor.Tensor, accumulate bool) error {
	if p.rec.probes {
		if err := p.rec.record(p.path, KindGrad, dOut); err != nil {
			return err
		}
	}
	if err := p.Projection.Backward(ps, dIn, dOut, in, accumulate); err != nil {
		return err
	}
	if !p.rec.probes || dIn == nil || accumulate {
		return nil // an accumulated dIn holds other modules' gradients too
	}
	return p.rec.record(p.path, KindGradInput, dIn)
}

// installProbes wraps every projection of m, when m can replace them, and reports whether it did.
func installProbes(m transformer.Model, rec *recorder) (bool, error) {
	a, ok := m.(transformer.Adaptable)
	if !ok {
		return false, nil
	}
	repl := map[string]transformer.Projection{}
	for _, mp := range a.Projections() {
		repl[mp.Path] = &projectionProbe{Projection: mp.Projection, path: mp.Path, rec: rec}
	}
	if err := a.ReplaceProjections(repl); err != nil {
		return false, fmt.Errorf("probe: putting the projection probes in place: %w", err)
	}
	return true, nil
}
