package amp

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// goldenFile is testdata/amp/gradscaler_golden.json, written by tools/reference/gradscaler_golden.py.
type goldenFile struct {
	Generator    string           `json:"generator"`
	TorchVersion string           `json:"torch_version"`
	Device       string           `json:"device"`
	Scenarios    []goldenScenario `json:"scenarios"`
}

// goldenScenario is one scripted run of torch.amp.GradScaler.
type goldenScenario struct {
	Name           string              `json:"name"`
	What           string              `json:"what"`
	InitScale      float64             `json:"init_scale"`
	GrowthFactor   float64             `json:"growth_factor"`
	BackoffFactor  float64             `json:"backoff_factor"`
	GrowthInterval int                 `json:"growth_interval"`
	Pattern        string              `json:"pattern"`
	ReloadAfter    int                 `json:"reload_after"`
	GradBits       map[string][]uint32 `json:"grad_bits"`    // per step kind: the true gradient's FP32 bits
	ReloadState    json.RawMessage     `json:"reload_state"` // PyTorch's state_dict() at the reload, as JSON
	Steps          []goldenStep        `json:"steps"`
}

// goldenStep is what PyTorch recorded around one optimizer step.
type goldenStep struct {
	Step             int      `json:"step"`
	Kind             string   `json:"kind"`
	SeedScale        float64  `json:"seed_scale"` // get_scale() before the step: the backward's seed
	Skipped          bool     `json:"skipped"`
	UnscaledGradBits []uint32 `json:"unscaled_grad_bits"` // p.grad after the step, when it ran
	Scale            float64  `json:"scale"`              // get_scale() after update()
	GrowthTracker    int      `json:"growth_tracker"`     // state_dict()["_growth_tracker"] after update()
}

// TestGradScalerGoldenPyTorch replays the scenarios torch.amp.GradScaler ran on CUDA and requires the same
// skips, unscaled gradients (bit for bit), scales and growth trackers after every step, across a state dict
// round trip through PyTorch's own JSON in the middle.
func TestGradScalerGoldenPyTorch(t *testing.T) {
	path := testutil.Testdata(t, "amp", "gradscaler_golden.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s not present: run `python3 tools/reference/gradscaler_golden.py testdata/amp` on a machine with torch and CUDA", path)
	}
	must(t, err)
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v (regenerate it with tools/reference/gradscaler_golden.py)", path, err)
	}
	if len(g.Scenarios) == 0 {
		t.Fatalf("%s has no scenarios", path)
	}
	t.Logf("golden from %s, torch %s on %s", g.Generator, g.TorchVersion, g.Device)
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		for _, sc := range g.Scenarios {
			t.Run(sc.Name, func(t *testing.T) { replayGolden(t, b, sc) })
		}
	})
}

// TestGoldenReplayVerifiedSequence runs the replay on a hand-written scenario in the golden's format holding
// the sequence verified on PyTorch (torch/amp/grad_scaler.py and aten/src/ATen/native/cuda/AmpKernels.cu: interval 2, found 0,0,1,0,0 → scales 8,16,8,8,16, trackers
// 1,0,0,1,0), with a reload after step 3, so the harness itself is checked before the golden exists.
func TestGoldenReplayVerifiedSequence(t *testing.T) {
	const one, two, three, four, inf = 1065353216, 1073741824, 1077936128, 1082130432, 2139095040
	sc := goldenScenario{
		Name: "facts_2_2", InitScale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2,
		Pattern: "ccicc", ReloadAfter: 3,
		GradBits:    map[string][]uint32{"c": {one, two, three, four}, "i": {one, inf, three, four}},
		ReloadState: json.RawMessage(`{"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2, "_growth_tracker": 0}`),
		Steps: []goldenStep{
			{Step: 1, Kind: "c", SeedScale: 8, UnscaledGradBits: []uint32{one, two, three, four}, Scale: 8, GrowthTracker: 1},
			{Step: 2, Kind: "c", SeedScale: 8, UnscaledGradBits: []uint32{one, two, three, four}, Scale: 16, GrowthTracker: 0},
			{Step: 3, Kind: "i", SeedScale: 16, Skipped: true, Scale: 8, GrowthTracker: 0},
			{Step: 4, Kind: "c", SeedScale: 8, UnscaledGradBits: []uint32{one, two, three, four}, Scale: 8, GrowthTracker: 1},
			{Step: 5, Kind: "c", SeedScale: 8, UnscaledGradBits: []uint32{one, two, three, four}, Scale: 16, GrowthTracker: 0},
		},
	}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) { replayGolden(t, b, sc) })
}

// replayGolden drives a GradScaler through sc on backend b: each step's gradient is the true gradient times the
// current scale in FP32 (what backward of loss·scale gives), unscaled and checked by Step, then Update.
func replayGolden(t *testing.T, b tensor.Backend, sc goldenScenario) {
	s, err := NewGradScaler(b, GradScalerOptions{InitScale: sc.InitScale, GrowthFactor: sc.GrowthFactor,
		BackoffFactor: sc.BackoffFactor, GrowthInterval: sc.GrowthInterval, Enabled: true})
	must(t, err)
	if len(sc.Steps) != len(sc.Pattern) {
		t.Fatalf("%d steps for pattern %q", len(sc.Steps), sc.Pattern)
	}
	for _, st := range sc.Steps {
		if float64(s.Scale()) != st.SeedScale {
			t.Fatalf("step %d: seed scale %v, PyTorch %v", st.Step, s.Scale(), st.SeedScale)
		}
		trueGrad, ok := sc.GradBits[st.Kind]
		if !ok {
			t.Fatalf("step %d: no gradient for kind %q", st.Step, st.Kind)
		}
		scaled := make([]float32, len(trueGrad))
		for i, u := range trueGrad {
			scaled[i] = math.Float32frombits(u) * s.Scale()
		}
		g := tensortest.Upload(t, b, tensor.F32, scaled)
		ran := false
		skipped, err := s.Step(func() error { ran = true; return nil }, g)
		must(t, err)
		if skipped != st.Skipped || ran == st.Skipped {
			t.Errorf("step %d (%s): skipped=%v ran=%v, PyTorch skipped=%v", st.Step, st.Kind, skipped, ran, st.Skipped)
		}
		if !st.Skipped {
			if got := bits(tensortest.Download(t, b, g)); !slices.Equal(got, st.UnscaledGradBits) {
				t.Errorf("step %d: unscaled gradient bits %x, PyTorch %x", st.Step, got, st.UnscaledGradBits)
			}
		}
		must(t, s.Update())
		if float64(s.Scale()) != st.Scale || s.GrowthTracker() != st.GrowthTracker {
			t.Fatalf("step %d (%s): scale %v tracker %d, PyTorch %v and %d", st.Step, st.Kind, s.Scale(), s.GrowthTracker(), st.Scale, st.GrowthTracker)
		}
		if st.Step == sc.ReloadAfter {
			var torchState GradScalerState
			if err := json.Unmarshal(sc.ReloadState, &torchState); err != nil {
				t.Fatalf("PyTorch's state dict %s: %v", sc.ReloadState, err)
			}
			if got := s.StateDict(); got != torchState {
				t.Fatalf("step %d: StateDict() = %+v, PyTorch %+v", st.Step, got, torchState)
			}
			// resume: a fresh default scaler restored from PyTorch's dict carries on
			s, err = NewGradScaler(b, DefaultGradScalerOptions())
			must(t, err)
			must(t, s.LoadStateDict(torchState))
		}
	}
}
