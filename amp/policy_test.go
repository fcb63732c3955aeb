package amp

import (
	"testing"

	"github.com/tune-ml/tune/tensor"
)

const (
	f32  = tensor.F32
	f16  = tensor.F16
	bf16 = tensor.BF16
	i32  = tensor.I32
)

func TestParsePrecision(t *testing.T) {
	tests := []struct {
		in      string
		want    Policy
		wantErr bool
	}{
		{"fp32", FP32, false},
		{"no", FP32, false}, // HF mixed_precision="no"
		{"fp16", FP16, false},
		{"BF16", BF16, false},
		{" bf16 ", BF16, false},
		{"float16", Policy{}, true}, // recipe spelling only; a dtype name is a mistake worth reporting
		{"fp8", Policy{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePrecision(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParsePrecision(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParsePrecision(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if err == nil {
				if back, _ := ParsePrecision(got.Precision()); back != got {
					t.Errorf("Precision() %q does not parse back to %+v", got.Precision(), got)
				}
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"fp32 is valid", FP32, true},
		{"fp16 is valid", FP16, true},
		{"bf16 is valid", BF16, true},
		{"enabled with F32 is not autocast", Policy{Enabled: true, DType: f32}, false},
		{"enabled with an integer dtype", Policy{Enabled: true, DType: i32}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestClassOf checks the documented mapping of every forward op the model uses onto PyTorch's lists.
func TestClassOf(t *testing.T) {
	tests := []struct {
		op   string
		want OpClass
		ok   bool
	}{
		{"Gemm", LowerPrecision, true},
		{"LayerNorm", FP32Class, true},
		{"LayerNormBackward", FP32Class, true}, // backward follows its forward
		{"Softmax", FP32Class, true},
		{"CrossEntropy", FP32Class, true},
		{"MSELoss", FP32Class, true},
		{"GlobalNorm", FP32Class, true},
		{"GELU", Passthrough, true},
		{"GELUBackward", Passthrough, true},
		{"Tanh", Passthrough, true},
		{"Dropout", Passthrough, true},
		{"Add", Passthrough, true},
		{"Transpose12", Passthrough, true},
		{"Embedding", Passthrough, true},
		{"AdamW", Passthrough, false}, // optimizer op: outside autocast
		{"Cast", Passthrough, false},  // explicit dtype: never autocast
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			got, ok := ClassOf(tt.op)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ClassOf(%q) = %v, %v; want %v, %v", tt.op, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestOutputDType checks the dtype each class returns, including the aten/src/ATen/autocast_mode.cpp consequences for BERT
// (GELU on an fp16 linear output stays fp16; residual fp16+fp32 gives fp32; embedding of an fp32 table is fp32).
func TestOutputDType(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		op   string
		in   []tensor.DType
		want tensor.DType
	}{
		{"fp16 linear on fp32 activations and weight", FP16, "Gemm", []tensor.DType{f32, f32}, f16},
		{"bf16 linear", BF16, "Gemm", []tensor.DType{f32, f32}, bf16},
		{"layer_norm on fp16 input returns fp32", FP16, "LayerNorm", []tensor.DType{f16, f32, f32}, f32},
		{"softmax on bf16 returns fp32", BF16, "Softmax", []tensor.DType{bf16}, f32},
		{"cross_entropy with int labels returns fp32", FP16, "CrossEntropy", []tensor.DType{f16, i32}, f32},
		{"mse_loss returns fp32", FP16, "MSELoss", []tensor.DType{f16, f32}, f32},
		{"gelu keeps fp16", FP16, "GELU", []tensor.DType{f16}, f16},
		{"tanh keeps bf16", BF16, "Tanh", []tensor.DType{bf16}, bf16},
		{"dropout keeps fp16", FP16, "Dropout", []tensor.DType{f16}, f16},
		{"residual add fp16 + fp32 promotes to fp32", FP16, "Add", []tensor.DType{f16, f32}, f32},
		{"add fp16 + bf16 promotes to fp32", FP16, "Add", []tensor.DType{f16, bf16}, f32},
		{"add fp16 + fp16 stays fp16", FP16, "Add", []tensor.DType{f16, f16}, f16},
		{"embedding of an fp32 table with int ids is fp32", FP16, "Embedding", []tensor.DType{i32, f32}, f32},
		{"transpose keeps its input", BF16, "Transpose12", []tensor.DType{bf16}, bf16},
		{"disabled: linear runs in its inputs' dtype", FP16.Disabled(), "Gemm", []tensor.DType{f32, f32}, f32},
		{"disabled: softmax of fp16 stays fp16", FP16.Disabled(), "Softmax", []tensor.DType{f16}, f16},
		{"fp32 policy: everything fp32", FP32, "Gemm", []tensor.DType{f32, f32}, f32},
		{"no floating input", FP16, "Embedding", []tensor.DType{i32}, tensor.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := ClassOf(tt.op)
			if got := tt.p.OutputDType(c, tt.in...); got != tt.want {
				t.Errorf("%v.OutputDType(%v, %v) = %v, want %v", tt.p, c, tt.in, got, tt.want)
			}
		})
	}
}

func TestOutputDTypePromote(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []tensor.DType
		want tensor.DType
	}{
		{"any fp32 input wins", []tensor.DType{f16, f32}, f32},
		{"all lower precision stays lower", []tensor.DType{f16, f16}, f16},
		{"integer inputs are ignored", []tensor.DType{i32, f16}, f16},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := FP16.OutputDType(Promote, tt.in...); got != tt.want {
				t.Errorf("OutputDType(Promote, %v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestDisabledNesting checks that a disabled region is lexical and re-enabling inside it works like a nested
// autocast context.
func TestDisabledNesting(t *testing.T) {
	p := BF16
	off := p.Disabled()
	if off.Enabled || off.GemmDType() != f32 {
		t.Fatalf("Disabled() = %+v, GemmDType %v; want disabled computing in F32", off, off.GemmDType())
	}
	if p != BF16 {
		t.Fatalf("Disabled() changed its receiver: %+v", p)
	}
	if got := off.Enable(tensor.Invalid); got != BF16 {
		t.Errorf("Disabled().Enable(Invalid) = %+v, want the outer policy %+v back", got, BF16)
	}
	if got := off.Enable(f16); got != FP16 {
		t.Errorf("Disabled().Enable(F16) = %+v, want %+v", got, FP16)
	}
	for _, q := range []Policy{FP32, FP16, BF16, off} {
		if q.AttentionScoresDType() != f32 {
			t.Errorf("%v: attention scores in %v, want F32 under every policy", q, q.AttentionScoresDType())
		}
	}
}
