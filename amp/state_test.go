package amp

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStateDictJSON checks the JSON spelling against what PyTorch's state_dict() gives through json.dumps.
func TestStateDictJSON(t *testing.T) {
	const fromTorch = `{"scale": 32768.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 17}`
	var st GradScalerState
	if err := json.Unmarshal([]byte(fromTorch), &st); err != nil {
		t.Fatal(err)
	}
	want := GradScalerState{Scale: 32768, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 2000, GrowthTracker: 17}
	if st != want {
		t.Fatalf("decoded %+v, want %+v", st, want)
	}
	out, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(out, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("marshalled %s lacks PyTorch's key %q", out, k)
		}
	}
	if len(keys) != 5 {
		t.Errorf("marshalled %s has %d keys, want PyTorch's 5", out, len(keys))
	}
	if out, _ := json.Marshal(GradScalerState{}); string(out) != "{}" {
		t.Errorf("empty state marshals to %s, want {} (PyTorch's disabled state_dict)", out)
	}
}

func TestStateDictDecodeErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in, errHas string
	}{
		{"missing key is named", `{"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3}`, `"_growth_tracker"`},
		{"not an object", `[1, 2]`, "state dict"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var st GradScalerState
			err := json.Unmarshal([]byte(tt.in), &st)
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("Unmarshal(%s) error = %v, want one naming %s", tt.in, err, tt.errHas)
			}
		})
	}
	var st GradScalerState
	if err := json.Unmarshal([]byte(`{}`), &st); err != nil || !st.IsEmpty() {
		t.Errorf("Unmarshal({}) = %+v, %v; want the empty state", st, err)
	}
}

func TestLoadStateDictErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		st     GradScalerState
		errHas string
	}{
		{"empty state from a disabled scaler", GradScalerState{}, "saved from a disabled GradScaler"},
		{"growth_factor out of range", GradScalerState{Scale: 8, GrowthFactor: 0.5, BackoffFactor: 0.5, GrowthInterval: 3}, "growth_factor"},
		{"negative tracker", GradScalerState{Scale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, GrowthTracker: -1}, "_growth_tracker"},
		{"zero scale", GradScalerState{Scale: 0, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3}, "scale"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestScaler(t, &scriptBackend{}, DefaultGradScalerOptions())
			err := s.LoadStateDict(tt.st)
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("LoadStateDict(%+v) error = %v, want one saying %q", tt.st, err, tt.errHas)
			}
		})
	}
	off, _ := NewGradScalerFor(&scriptBackend{}, BF16)
	if err := off.LoadStateDict(GradScalerState{}); err != nil {
		t.Errorf("disabled scaler: LoadStateDict = %v, want a no-op as in PyTorch", err)
	}
}

// TestStateDictRoundTripMidSequence saves the state in the middle of a run through JSON, loads it into a fresh
// scaler built with other options, and checks that both continue identically.
func TestStateDictRoundTripMidSequence(t *testing.T) {
	f := &scriptBackend{}
	o := GradScalerOptions{InitScale: 1024, GrowthFactor: 3, BackoffFactor: 0.25, GrowthInterval: 3, Enabled: true}
	a := newTestScaler(t, f, o)
	pattern := []bool{false, false, true, false, false, false, false, true, true, false, false, false, false}
	for _, found := range pattern[:5] {
		scalerStep(t, a, f, found)
	}
	data, err := json.Marshal(a.StateDict())
	if err != nil {
		t.Fatal(err)
	}
	var st GradScalerState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	b := newTestScaler(t, f, DefaultGradScalerOptions())
	if err := b.LoadStateDict(st); err != nil {
		t.Fatal(err)
	}
	if b.StateDict() != a.StateDict() {
		t.Fatalf("after loading %s: %+v, want %+v", data, b.StateDict(), a.StateDict())
	}
	for i, found := range pattern[5:] {
		scalerStep(t, a, f, found)
		scalerStep(t, b, f, found)
		if a.StateDict() != b.StateDict() {
			t.Fatalf("step %d after the round trip: loaded %+v, original %+v", i+6, b.StateDict(), a.StateDict())
		}
	}
}
