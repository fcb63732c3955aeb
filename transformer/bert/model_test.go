package bert

import (
	"errors"
	"github.com/tune-ml/tune/transformer"
	"math"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// TestForwardErrors checks that misuse gets a message instead of a wrong result.
func TestForwardErrors(t *testing.T) {
	cfg := tinyConfig()
	m := newTestModel(t, cpuBackend(), cfg, 1)
	good := testBatch(2, 4, cfg.VocabSize, 3, []int{4, 2})
	for _, c := range []struct {
		why   string
		batch func() *loaders.Batch
	}{
		{"nil batch", func() *loaders.Batch { return nil }},
		{"T beyond max_position_embeddings", func() *loaders.Batch { return testBatch(1, 17, cfg.VocabSize, 3, []int{17}) }},
		{"ids shorter than B·T", func() *loaders.Batch { b := *good; b.InputIDs = b.InputIDs[:5]; return &b }},
		{"token id outside the vocabulary", func() *loaders.Batch {
			b := *good
			b.InputIDs = append([]int32(nil), good.InputIDs...)
			b.InputIDs[3] = int32(cfg.VocabSize)
			return &b
		}},
		{"label outside [0, L)", func() *loaders.Batch { b := *good; b.Labels = []int64{0, 3}; return &b }},
		{"labels of the wrong length", func() *loaders.Batch { b := *good; b.Labels = []int64{0}; return &b }},
		{"float targets with 3 labels (multi-label)", func() *loaders.Batch {
			b := *good
			b.Labels, b.Targets = nil, []float32{1, 0}
			return &b
		}},
	} {
		t.Run(c.why, func(t *testing.T) {
			m.Config.ProblemType = ""
			_, err := m.Forward(c.batch(), transformer.ForwardOptions{HostLogits: true, Train: true})
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
		})
	}
	m.Config.ProblemType = ""
	if _, err := m.Forward(&loaders.Batch{B: 2, T: 4, InputIDs: good.InputIDs, Targets: []float32{1, 0}},
		transformer.ForwardOptions{HostLogits: true}); !errors.Is(err, ErrMultiLabel) {
		t.Errorf("multi-label targets: got %v, want ErrMultiLabel", err)
	}
}

// TestBackwardNeedsTrainingForward: Backward without a training Forward with labels, or twice, is an error.
func TestBackwardNeedsTrainingForward(t *testing.T) {
	cfg := tinyConfig()
	m := newTestModel(t, cpuBackend(), cfg, 1)
	batch := testBatch(2, 4, cfg.VocabSize, 3, []int{4, 2})
	unlabelled := *batch
	unlabelled.Labels = nil
	for _, c := range []struct {
		why     string
		prepare func() error
	}{
		{"no Forward", func() error { return nil }},
		{"eval Forward", func() error { _, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true}); return err }},
		{"Forward without labels", func() error {
			out, err := m.Forward(&unlabelled, transformer.ForwardOptions{HostLogits: true, Train: true})
			if err == nil && !math.IsNaN(float64(out.Loss)) {
				t.Errorf("loss without labels = %v, want NaN", out.Loss)
			}
			return err
		}},
		{"second Backward", func() error {
			if _, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true, Train: true}); err != nil {
				return err
			}
			return m.Backward(1)
		}},
	} {
		t.Run(c.why, func(t *testing.T) {
			if err := c.prepare(); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(1); err == nil {
				t.Fatal("Backward succeeded")
			}
		})
	}
}

// TestProblemTypeResolution: transformers' choice of loss from num_labels and the label dtype, stored in the
// config after the first labelled Forward.
func TestProblemTypeResolution(t *testing.T) {
	for _, c := range []struct {
		labels  int
		targets bool
		want    string
	}{
		{3, false, SingleLabel},
		{1, true, Regression},
	} {
		cfg := tinyConfig()
		cfg.ID2Label = DefaultLabels(c.labels)
		m := newTestModel(t, cpuBackend(), cfg, 1)
		batch := testBatch(2, 4, cfg.VocabSize, c.labels, []int{4, 2})
		if c.targets {
			batch.Labels, batch.Targets = nil, []float32{0.5, 1.5}
		}
		out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		if m.Config.ProblemType != c.want {
			t.Errorf("num_labels %d: problem_type %q, want %q", c.labels, m.Config.ProblemType, c.want)
		}
		// Recompute the loss on the host from the logits.
		var want float64
		switch c.want {
		case SingleLabel:
			for i, l := range batch.Labels {
				row := out.Logits[i*c.labels : (i+1)*c.labels]
				var mx, sum float64 = math.Inf(-1), 0
				for _, v := range row {
					mx = math.Max(mx, float64(v))
				}
				for _, v := range row {
					sum += math.Exp(float64(v) - mx)
				}
				want += mx + math.Log(sum) - float64(row[l])
			}
		case Regression:
			for i, y := range batch.Targets {
				d := float64(out.Logits[i]) - float64(y)
				want += d * d
			}
		}
		want /= 2
		if math.Abs(float64(out.Loss)-want) > 1e-5*math.Abs(want) {
			t.Errorf("%s loss %v, host computation %v", c.want, out.Loss, want)
		}
	}
}

// TestRegressionForwardOfAnUnlabelledBatch (tester4): tune predict on a regression model (num_labels 1) failed
// with "problem_type regression needs float targets in Batch.Targets (got integer Labels)": a prediction file's
// batch carries Labels of −100 only. An evaluation Forward of a batch with no labelled row computes no loss
// (NaN) for any problem type, and gives the logits.
func TestRegressionForwardOfAnUnlabelledBatch(t *testing.T) {
	cfg := tinyConfig()
	cfg.ID2Label = DefaultLabels(1)
	m := newTestModel(t, cpuBackend(), cfg, 1)
	batch := testBatch(2, 4, cfg.VocabSize, 1, []int{4, 2})
	batch.Labels = []int64{ignoreIndex, ignoreIndex}
	out, err := m.Forward(batch, transformer.ForwardOptions{HostLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(out.Loss)) || len(out.Logits) != 2 {
		t.Errorf("loss %v, %d logits; want NaN and 2", out.Loss, len(out.Logits))
	}
}
