package probe

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/recipes"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/tensor/tensortest"
	"github.com/tune-ml/tune/transformer"
)

// The comparison's configuration, as tools/reference/amp_compare.py's BATCH and MAX_LENGTH.
const (
	compareBatch     = 8
	compareMaxLength = 128
)

// openTiny loads tiny-bert-random on b and the first n batches of testdata/debug/amp_compare_input.tsv
// (labelled: SST-2 dev rows) in file order.
func openTiny(t *testing.T, b tensor.Backend, n int) (*recipes.Run, []*loaders.Batch) {
	t.Helper()
	dir := testutil.SharedData(t, "tiny-bert-random")
	run, err := recipes.OpenModel(dir, "", "", b)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := run.LoadDataset("input", testutil.Testdata(t, "debug", "amp_compare_input.tsv"), recipes.Data{MaxLength: compareMaxLength}, nil)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]int, ds.Len())
	for i := range order {
		order[i] = i
	}
	var batches []*loaders.Batch
	for _, idx := range loaders.Batches(order, compareBatch, false) {
		if n > 0 && len(batches) == n {
			break
		}
		bt, err := ds.Batch(idx)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, bt)
	}
	return run, batches
}

// plant writes v into element i of the named parameter.
func plant(t *testing.T, m transformer.Model, name string, i int, v float32) {
	t.Helper()
	for _, p := range m.NamedParameters() {
		if p.Name == name {
			host := make([]float32, p.Value.Numel())
			if err := m.Backend().Download(host, p.Value); err != nil {
				t.Fatal(err)
			}
			host[i] = v
			if err := m.Backend().Upload(p.Value, host); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no parameter %s", name)
}

var policies = []amp.Policy{amp.FP32, amp.BF16, amp.FP16}

// TestFindNaNNamesThePlantedLayer plants a NaN in one weight of tiny-bert-random's second layer: FindNaN lists
// that weight, and names the module whose output turns non-finite first, its query projection, with its own
// weights as the cause; the first layer and the embeddings stay finite.
func TestFindNaNNamesThePlantedLayer(t *testing.T) {
	const weight = "bert.encoder.layer.1.attention.self.query.weight"
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range policies {
			t.Run(p.Precision(), func(t *testing.T) {
				run, batches := openTiny(t, b, 2)
				plant(t, run.Model, weight, 100, float32(math.NaN()))
				rep, err := FindNaN(run.Model, batches, NaNOptions{Policy: p, Scale: 65536})
				if err != nil {
					t.Fatal(err)
				}
				bad := rep.BadWeights()
				if len(bad) != 1 || bad[0].Module != weight || bad[0].First != 100 || bad[0].NaN != 1 {
					t.Errorf("bad weights %+v, want %s with one NaN at 100", bad, weight)
				}
				if rep.First == nil || rep.First.Module != "bert.encoder.layer.1.attention.self.query" || rep.First.Kind != KindOutput || rep.FirstIn != 0 {
					t.Fatalf("first non-finite %+v (batch %d), want the output of layer 1's query in batch 1", rep.First, rep.FirstIn)
				}
				if !strings.Contains(rep.Upstream, weight) {
					t.Errorf("explanation %q does not name %s", rep.Upstream, weight)
				}
				for _, s := range rep.Batches[0].Forward {
					if strings.HasPrefix(s.Module, "bert.encoder.layer.0") || s.Module == "bert.embeddings" {
						if s.NonFinite() {
							t.Errorf("%s is non-finite before the planted layer", s.Where())
						}
					}
				}
				if !rep.Probes {
					t.Error("the projections were not probed")
				}
				var out bytes.Buffer
				if err := rep.Write(&out); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(out.String(), "first non-finite: the output of bert.encoder.layer.1.attention.self.query (batch 1") {
					t.Errorf("report lacks the verdict:\n%s", out.String())
				}
				// The probes are gone and the model still runs its projections.
				for _, mp := range run.Base.Projections() {
					if _, ok := mp.Projection.(*projectionProbe); ok {
						t.Fatalf("probe left in place at %s", mp.Path)
					}
				}
			})
		}
	})
}

// TestFindNaNClean: the unmodified model is finite everywhere, forward and backward, and the report says so.
func TestFindNaNClean(t *testing.T) {
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range policies {
			t.Run(p.Precision(), func(t *testing.T) {
				run, batches := openTiny(t, b, 1)
				rep, err := FindNaN(run.Model, batches, NaNOptions{Policy: p, Scale: 65536})
				if err != nil {
					t.Fatal(err)
				}
				if rep.Found() {
					t.Errorf("found %+v in a clean model", rep.First)
				}
				tr := rep.Batches[0]
				if len(tr.Backward) == 0 || len(tr.Grads) == 0 {
					t.Fatalf("no backward trace: %d stats, %d gradients", len(tr.Backward), len(tr.Grads))
				}
				if tr.Forward[0].Module != "bert.embeddings" || tr.Backward[0].Module != "classifier" {
					t.Errorf("trace starts at %s (forward) and %s (backward)", tr.Forward[0].Module, tr.Backward[0].Module)
				}
			})
		}
	})
}

// TestFindNaNBadData: a token id beyond the vocabulary is reported (and its batch not run).
func TestFindNaNBadData(t *testing.T) {
	run, batches := openTiny(t, cpu.New(), 2)
	batches[1].InputIDs[3] = 40000
	rep, err := FindNaN(run.Model, batches, NaNOptions{Policy: amp.FP32})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Data) != 1 || !strings.Contains(rep.Data[0], "batch 2 row 1 position 3: input id 40000 is outside the vocabulary 0..30521") {
		t.Errorf("data problems %q", rep.Data)
	}
	if len(rep.Batches) != 1 || !rep.Found() {
		t.Errorf("%d batches ran, found %v; want batch 1 only and a finding", len(rep.Batches), rep.Found())
	}
}

// ampReference is tools/reference/amp_compare.py's output.
type ampReference struct {
	FP32Logits []float64 `json:"fp32_logits"`
	SDPA       map[string]struct {
		Max  float64 `json:"max_abs_diff"`
		Mean float64 `json:"mean_abs_diff"`
	} `json:"sdpa"`
}

// TestCompareMatchesTransformers runs Compare on tiny-bert-random over the reference's 256 SST-2 dev sentences
// (batches of 8, max_length 128) and checks the logits row against transformers' FP32-vs-autocast difference
// on the GPU (testdata/debug/amp_compare_reference.json): max and mean |Δ| within 10%, for FP16 and BF16; and
// tune's FP32 logits equal transformers' to 1e-4.
func TestCompareMatchesTransformers(t *testing.T) {
	data, err := os.ReadFile(testutil.Testdata(t, "debug", "amp_compare_reference.json"))
	if err != nil {
		t.Skipf("no reference (run tools/reference/amp_compare.py on the GPU machine): %v", err)
	}
	var ref ampReference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		run, batches := openTiny(t, b, 0)
		out, err := run.Model.Forward(batches[0], transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Logits) != len(ref.FP32Logits) {
			t.Fatalf("%d FP32 logits, the reference has %d", len(out.Logits), len(ref.FP32Logits))
		}
		for i, v := range out.Logits {
			if math.Abs(float64(v)-ref.FP32Logits[i]) > 1e-4 {
				t.Fatalf("FP32 logit %d: %v, transformers %v", i, v, ref.FP32Logits[i])
			}
		}
		rep, err := Compare(run.Model, batches, []amp.Policy{amp.FP16, amp.BF16})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := rep.Write(&buf); err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", buf.String())
		row := rep.Row(LogitsRow)
		if row == nil {
			t.Fatal("no logits row")
		}
		for i, name := range []string{"fp16", "bf16"} {
			want, got := ref.SDPA[name], row.Diffs[i]
			t.Logf("%s: tune max %.4g mean %.4g, transformers max %.4g mean %.4g", name, got.Max, got.Mean, want.Max, want.Mean)
			if math.Abs(got.Max-want.Max) > 0.1*want.Max || math.Abs(got.Mean-want.Mean) > 0.1*want.Mean {
				t.Errorf("%s logits: max|Δ| %.4g, mean|Δ| %.4g; transformers %.4g and %.4g (want within 10%%)", name, got.Max, got.Mean, want.Max, want.Mean)
			}
			if want := []tensor.DType{tensor.F16, tensor.BF16}[i]; got.DType != want {
				t.Errorf("%s logits dtype %v", name, got.DType)
			}
		}
	})
}

// TestFindNaNFP16WeightOverflow: a weight of 1e5 is finite in FP32 and BF16 but its FP16 copy is inf, so only
// the fp16 pass turns non-finite, at that projection, and the explanation says why.
func TestFindNaNFP16WeightOverflow(t *testing.T) {
	const weight = "bert.encoder.layer.0.intermediate.dense.weight"
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, p := range policies {
			t.Run(p.Precision(), func(t *testing.T) {
				run, batches := openTiny(t, b, 1)
				plant(t, run.Model, weight, 3, 1e5)
				rep, err := FindNaN(run.Model, batches, NaNOptions{Policy: p, Scale: 1})
				if err != nil {
					t.Fatal(err)
				}
				if p != amp.FP16 {
					if rep.Found() {
						t.Errorf("%s: found %+v", p.Precision(), rep.First)
					}
					return
				}
				if rep.First == nil || rep.First.Module != "bert.encoder.layer.0.intermediate.dense" {
					t.Fatalf("first non-finite %+v, want layer 0's intermediate.dense", rep.First)
				}
				if !strings.Contains(rep.Upstream, "exceed FP16's 65504") || !strings.Contains(rep.Upstream, weight) {
					t.Errorf("explanation %q", rep.Upstream)
				}
			})
		}
	})
}
