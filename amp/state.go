package amp

import (
	"encoding/json"
	"fmt"
	"math"
)

// GradScalerState is GradScaler's state dict with PyTorch's keys (torch.amp.GradScaler.state_dict() in
// torch/amp/grad_scaler.py), so a checkpoint's JSON reads the same in both: {"scale": 65536.0, "growth_factor": 2.0,
// "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 0}.
//
// The zero value is the empty state dict of a disabled scaler and marshals to {}; a state read from {}
// is empty too (IsEmpty). Unmarshalling a non-empty object that lacks one of the five keys is an error naming it.
type GradScalerState struct {
	Scale          float64 `json:"scale"`           // the current loss scale (initially 2^16 = 65536)
	GrowthFactor   float64 `json:"growth_factor"`   // scale multiplier after GrowthInterval clean steps (2.0)
	BackoffFactor  float64 `json:"backoff_factor"`  // scale multiplier after a step with inf/NaN gradients (0.5)
	GrowthInterval int     `json:"growth_interval"` // consecutive clean steps before the scale grows (2000)
	GrowthTracker  int     `json:"_growth_tracker"` // clean steps since the last growth or backoff
}

// IsEmpty reports whether st is the empty state dict ({}) of a disabled scaler.
func (st GradScalerState) IsEmpty() bool { return st == GradScalerState{} }

// gradScalerStateJSON has GradScalerState's fields without its methods, for the default encoding.
type gradScalerStateJSON GradScalerState

// MarshalJSON writes {} for the empty state and the five PyTorch keys otherwise.
func (st GradScalerState) MarshalJSON() ([]byte, error) {
	if st.IsEmpty() {
		return []byte("{}"), nil
	}
	return json.Marshal(gradScalerStateJSON(st))
}

// UnmarshalJSON reads a PyTorch state dict; {} gives the empty state, and a non-empty object must hold all five
// keys (extra keys are ignored, as PyTorch ignores them).
func (st *GradScalerState) UnmarshalJSON(data []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return fmt.Errorf("amp: GradScaler state dict: %w", err)
	}
	if len(keys) == 0 {
		*st = GradScalerState{}
		return nil
	}
	for _, k := range []string{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} {
		if _, ok := keys[k]; !ok {
			return fmt.Errorf("amp: GradScaler state dict has no %q key (want scale, growth_factor, backoff_factor, growth_interval, _growth_tracker)", k)
		}
	}
	var v gradScalerStateJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("amp: GradScaler state dict: %w", err)
	}
	*st = GradScalerState(v)
	return nil
}

// StateDict returns the scaler's state (PyTorch's state_dict()): the scale as the FP32 value widened to float64,
// the factors, the interval and the growth tracker. A disabled scaler returns the empty state ({}).
func (s *GradScaler) StateDict() GradScalerState {
	if !s.opts.Enabled {
		return GradScalerState{}
	}
	return GradScalerState{
		Scale:          float64(s.scale),
		GrowthFactor:   s.opts.GrowthFactor,
		BackoffFactor:  s.opts.BackoffFactor,
		GrowthInterval: s.opts.GrowthInterval,
		GrowthTracker:  int(s.tracker),
	}
}

// LoadStateDict restores a state saved by StateDict or by PyTorch (load_state_dict()): scale (rounded to FP32),
// factors, interval and tracker; the per-step state is reset. Loading into a disabled scaler does nothing, as in
// PyTorch. Loading the empty state is an error, since it was saved from a disabled scaler (a bf16/fp32 run); an
// out-of-range value is an error naming its key.
func (s *GradScaler) LoadStateDict(st GradScalerState) error {
	if !s.opts.Enabled {
		return nil
	}
	if st.IsEmpty() {
		return fmt.Errorf("amp: GradScaler.LoadStateDict: the state dict is empty, possibly because it was saved from a disabled GradScaler (a bf16 or fp32 run); resume with the precision it was saved with")
	}
	if err := checkOptions("scale", st.Scale, st.GrowthFactor, st.BackoffFactor, st.GrowthInterval); err != nil {
		return fmt.Errorf("amp: GradScaler.LoadStateDict: %w", err)
	}
	if st.GrowthTracker < 0 || st.GrowthTracker > math.MaxInt32 {
		return fmt.Errorf("amp: GradScaler.LoadStateDict: _growth_tracker %d must be a non-negative int32", st.GrowthTracker)
	}
	s.opts.GrowthFactor, s.opts.BackoffFactor, s.opts.GrowthInterval = st.GrowthFactor, st.BackoffFactor, st.GrowthInterval
	s.scale = float32(st.Scale)
	s.tracker = int32(st.GrowthTracker)
	s.reset()
	return nil
}
