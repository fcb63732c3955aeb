package transformer

import (
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestMatchCheckpointWrongDType: a tensor of an expected name and shape stored with a dtype that is not F32, F16
// or BF16 is reported in WrongDType, neither matched (it would reach LoadParams' Float32) nor missing, and
// CheckpointProblems names it. A TensorInfo without a dtype is taken as before.
func TestMatchCheckpointWrongDType(t *testing.T) {
	specs := []CheckpointTensor{{"a.weight", []int{2, 3}}, {"b.bias", []int{3}}, {"c.bias", []int{3}}}
	infos := []loaders.TensorInfo{
		{Name: "a.weight", DType: "BF16", Shape: []int{2, 3}}, {Name: "b.bias", DType: "I32", Shape: []int{3}},
		{Name: "c.bias", Shape: []int{3}},
	}
	source, r := MatchCheckpoint(specs, infos, CheckpointRules{})
	if r.Matched != 2 || source["b.bias"] != "" || len(r.Missing) != 0 || len(r.WrongDType) != 1 || r.WrongDType[0].DType != "I32" {
		t.Errorf("source %v, report %+v", source, r)
	}
	want := "b.bias is I32, but the model needs a floating-point tensor (F32, F16 or BF16) here"
	if p := CheckpointProblems(r); !strings.Contains(p, want) {
		t.Errorf("problems %q lack %q", p, want)
	}
}
