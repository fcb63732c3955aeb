package trainer

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// sliceDataset is an in-memory Dataset of token-id sequences with labels, padded with id 0.
type sliceDataset struct {
	ids    [][]int32
	labels []int64 // nil: unlabelled
}

func (d *sliceDataset) Len() int { return len(d.ids) }

func (d *sliceDataset) Batch(idx []int) (*loaders.Batch, error) {
	T := 0
	for _, i := range idx {
		T = max(T, len(d.ids[i]))
	}
	b := &loaders.Batch{B: len(idx), T: T, InputIDs: make([]int32, len(idx)*T), TokenTypeIDs: make([]int32, len(idx)*T), AttentionMask: make([]int32, len(idx)*T)}
	if d.labels != nil {
		b.Labels = make([]int64, len(idx))
	}
	for r, i := range idx {
		for t, id := range d.ids[i] {
			b.InputIDs[r*T+t] = id
			b.AttentionMask[r*T+t] = 1
		}
		if d.labels != nil {
			b.Labels[r] = d.labels[i]
		}
	}
	return b, nil
}

// toyTask returns n examples over a vocabulary of v ids where the label is 1 when the sequence holds more ids
// from the upper half of the vocabulary than from the lower half: learnable by a bag-of-embeddings model.
// Lengths vary from 2 to 6 so batches need padding.
func toyTask(n, v int, seed uint64) *sliceDataset {
	d := &sliceDataset{}
	x := seed*2654435761 + 1
	next := func() int {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return int(x >> 33)
	}
	for range n {
		l := 2 + next()%5
		ids := make([]int32, l)
		hi := 0
		for j := range ids {
			ids[j] = int32(1 + next()%(v-1))
			if int(ids[j]) >= v/2 {
				hi++
			}
		}
		label := int64(0)
		if 2*hi > l {
			label = 1
		}
		d.ids = append(d.ids, ids)
		d.labels = append(d.labels, label)
	}
	return d
}

// testArgs returns arguments for a short CPU run writing into a temporary output_dir.
func testArgs(t *testing.T) TrainingArguments {
	a := DefaultTrainingArguments()
	a.OutputDir = t.TempDir()
	a.LearningRate = 5e-2
	a.PerDeviceTrainBatchSize = 4
	a.PerDeviceEvalBatchSize = 5
	a.NumTrainEpochs = 2
	a.LoggingSteps = 1
	a.SaveStrategy = IntervalNo
	return a
}

// logCapture is a slog handler that keeps the messages, for tests of warnings.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(&lockedWriter{c}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

type lockedWriter struct{ c *logCapture }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.buf.Write(p)
}

// newTestTrainer builds a Trainer on m with output and logs captured.
func newTestTrainer(t *testing.T, m Model, a TrainingArguments, train, eval Dataset, opts ...Option) (*Trainer, *bytes.Buffer, *logCapture) {
	t.Helper()
	var out bytes.Buffer
	logs := &logCapture{}
	tr, err := New(m, a, train, eval, append([]Option{WithOutput(&out), WithLogger(logs.logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if tr.deferOverride == nil { // each step reads its loss and norm at once unless a test asks (deferred_test.go)
		eager := false
		tr.deferOverride = &eager
	}
	t.Cleanup(tr.Close)
	return tr, &out, logs
}

// deferSteps makes the Trainer keep its steps' loss and gradient norm on the device whatever the backend.
func deferSteps(on bool) Option { return func(t *Trainer) { t.deferOverride = &on } }

// trainLogs returns the training entries (those with a loss) of h.
func trainLogs(h []LogEntry) []LogEntry {
	var out []LogEntry
	for _, l := range h {
		if _, ok := l["loss"]; ok {
			out = append(out, l)
		}
	}
	return out
}

// mustTrain runs Train and fails the test on error.
func mustTrain(t *testing.T, tr *Trainer) TrainOutput {
	t.Helper()
	out, err := tr.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// contains reports whether s contains every part.
func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
