package transformer

import (
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
)

func TestMatchCheckpoint(t *testing.T) {
	specs := []CheckpointTensor{{"m.a.weight", []int{2, 3}}, {"m.b.weight", []int{4}}, {"m.c.weight", []int{5}}, {"m.d.weight", []int{1}}}
	rules := CheckpointRules{
		Canonical: func(key string, want map[string]bool) (string, bool) {
			if want[key] {
				return key, true
			}
			return "m." + key, want["m."+key]
		},
		Ignore: func(key string) string {
			if strings.HasSuffix(key, ".buf") {
				return "buffer"
			}
			return ""
		},
		Tied: map[string]string{"head.weight": "m.a.weight"},
	}
	infos := []loaders.TensorInfo{
		{Name: "m.a.weight", Shape: []int{2, 3}}, {Name: "b.weight", Shape: []int{4}}, {Name: "m.b.weight", Shape: []int{4}},
		{Name: "m.c.weight", Shape: []int{6}}, {Name: "x.buf", Shape: []int{1}}, {Name: "head.weight", Shape: []int{2, 3}},
		{Name: "m.zzz", Shape: []int{1}},
	}
	source, r := MatchCheckpoint(specs, infos, rules)
	if source["m.a.weight"] != "m.a.weight" || source["m.b.weight"] != "b.weight" || r.Matched != 2 {
		t.Errorf("source %v, matched %d", source, r.Matched)
	}
	if !slices.Equal(r.Unexpected, []string{"m.b.weight", "m.zzz"}) || !slices.Equal(r.Missing, []string{"m.d.weight"}) ||
		len(r.Mismatched) != 1 || r.Mismatched[0].Name != "m.c.weight" || len(r.Ignored) != 1 || len(r.Tied) != 1 ||
		len(r.Renamed) != 1 {
		t.Errorf("report %+v", r)
	}
	p := CheckpointProblems(r)
	for _, w := range []string{"1 tensors missing from the checkpoint: m.d.weight", "2 tensors the model does not have", "m.c.weight"} {
		if !strings.Contains(p, w) {
			t.Errorf("problems %q lack %q", p, w)
		}
	}
	if CheckpointProblems(&loaders.LoadReport{Matched: 3}) != "" {
		t.Error("a clean report has problems")
	}
}

// TestSaveLoadParams writes parameters (one transposed in the file) in two shards and reads them back.
func TestSaveLoadParams(t *testing.T) {
	b := cpu.New()
	w := tensortest.Upload(t, b, tensor.F32, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	v := tensortest.Upload(t, b, tensor.F32, []float32{7, 8}, 2)
	list := []NamedParameter{{"w", &Param{Value: w}}, {"v", &Param{Value: v}}}
	rules := CheckpointRules{Transposed: func(name string) bool { return name == "w" }}
	dir := t.TempDir()
	if err := SaveParams(b, dir, list, rules, 16); err != nil { // 24 + 8 bytes: two shards
		t.Fatal(err)
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Files()) != 2 {
		t.Errorf("files %v, want two shards", ck.Files())
	}
	ht, err := ck.Get("w")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := ht.Float32()
	if !slices.Equal(ht.Shape, []int{3, 2}) || !slices.Equal(got, []float32{1, 4, 2, 5, 3, 6}) {
		t.Errorf("w stored as %v %v, want its transpose", ht.Shape, got)
	}
	source, r := MatchCheckpoint(CheckpointTensors(list, rules), ck.Infos(), rules)
	if CheckpointProblems(r) != "" {
		t.Fatal(CheckpointProblems(r))
	}
	w2, v2 := tensortest.Alloc(t, b, tensor.F32, 2, 3), tensortest.Alloc(t, b, tensor.F32, 2)
	back := []NamedParameter{{"w", &Param{Value: w2}}, {"v", &Param{Value: v2}}}
	if err := LoadParams(b, ck, back, source, rules); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tensortest.Download(t, b, w2), []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(tensortest.Download(t, b, v2), []float32{7, 8}) {
		t.Error("LoadParams did not restore the values")
	}
}
