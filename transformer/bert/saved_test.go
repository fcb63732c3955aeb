package bert

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"github.com/tune-ml/tune/transformer"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

var updateSaved = flag.Bool("update-saved", false,
	"rewrite testdata/bert/saved_by_tune, the tune-saved checkpoint that tools/reference/bert_goldens.py loads into transformers")

// savedModel is the model behind testdata/bert/saved_by_tune: tinyConfig with named labels, detweights seed 8.
func savedModel(t *testing.T) (*BertForSequenceClassification, *loaders.Batch) {
	cfg := tinyConfig()
	cfg.ID2Label = []string{"negative", "neutral", "positive"}
	return newTestModel(t, cpuBackend(), cfg, 8), testBatch(2, 7, cfg.VocabSize, 3, []int{7, 4})
}

// TestSavedCheckpointIsStable saves the model behind testdata/bert/saved_by_tune again and requires the same
// bytes (run with -update-saved to rewrite it, with the inputs and logits the transformers check compares).
func TestSavedCheckpointIsStable(t *testing.T) {
	dir := testutil.Testdata(t, "bert", "saved_by_tune")
	m, batch := savedModel(t)
	if *updateSaved {
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		unlabelled := *batch
		unlabelled.Labels = nil // a labelled Forward would resolve problem_type into the config
		out, err := m.Forward(&unlabelled, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, types, mask := make([]int64, len(batch.InputIDs)), make([]int64, len(batch.InputIDs)), make([]int64, len(batch.InputIDs))
		for i := range ids {
			ids[i], types[i], mask[i] = int64(batch.InputIDs[i]), int64(batch.TokenTypeIDs[i]), int64(batch.AttentionMask[i])
		}
		var hosts []loaders.HostTensor
		for _, x := range []struct {
			name string
			v    []int64
		}{{"inputs/input_ids", ids}, {"inputs/token_type_ids", types}, {"inputs/attention_mask", mask}} {
			h, err := loaders.NewHostTensorInt64(x.name, []int{batch.B, batch.T}, x.v)
			if err != nil {
				t.Fatal(err)
			}
			hosts = append(hosts, h)
		}
		h, err := loaders.NewHostTensor("fp32/logits", tensor.F32, []int{batch.B, out.NumLabels}, out.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := loaders.WriteSafetensors(filepath.Join(dir, "expected.safetensors"), append(hosts, h), nil); err != nil {
			t.Fatal(err)
		}
	}
	tmp := t.TempDir()
	if err := m.Save(tmp); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{loaders.ConfigName, loaders.SafetensorsWeightsName} {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%v (create it with go test ./transformer -run TestSavedCheckpointIsStable -update-saved)", err)
		}
		got, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata/bert/saved_by_tune/%s (if the change is intended, rerun with -update-saved and regenerate the transformers check)", name, name)
		}
	}
}

// TestSavedCheckpointLoadsInTransformers reads what tools/reference/bert_goldens.py found when it loaded
// testdata/bert/saved_by_tune with BertForSequenceClassification.from_pretrained: no missing, unexpected or
// mis-shaped keys, and the logits tune computed.
func TestSavedCheckpointLoadsInTransformers(t *testing.T) {
	path := testutil.Testdata(t, "bert", "saved_by_tune_check.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s not generated yet: run %s", path, goldenScript)
	}
	if err != nil {
		t.Fatal(err)
	}
	var check struct {
		Missing, Unexpected, Mismatched []string
		LogitsRelErr                    float64 `json:"logits_rel_err"`
		Transformers                    string
	}
	if err := json.Unmarshal(data, &check); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(check.Missing)+len(check.Unexpected)+len(check.Mismatched) > 0 {
		t.Errorf("transformers %s loading tune's checkpoint: missing %v, unexpected %v, mis-shaped %v",
			check.Transformers, check.Missing, check.Unexpected, check.Mismatched)
	}
	if check.LogitsRelErr > 1e-5 {
		t.Errorf("transformers' logits differ from tune's: relative error %.3g", check.LogitsRelErr)
	}
}
