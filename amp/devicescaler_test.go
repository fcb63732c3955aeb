package amp

import (
	"math"
	"slices"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/tensortest"
)

// TestDeviceScalerIsGradScaler runs the same AdamW steps twice from the same gradients, once with the
// GradScaler deciding on the host and once with its DeviceScaler (found-inf flag, skip, scale update and
// AdamW's lr and t from a table row indexed by the device's count of steps taken), with overflows on single
// steps and runs of steps and growth every 3 clean steps: weights, moments, scale, growth tracker and steps
// taken agree bit for bit after every step, and GradScaler.UpdateFound replays the host's state from the
// flags alone. The max_consecutive_skipped_steps stop (MaxSkipped) leaves every later step skipped.
func TestDeviceScalerIsGradScaler(t *testing.T) {
	const p, steps = 37, 16
	overflow := map[int]bool{2: true, 6: true, 7: true, 12: true}
	tensortest.ForEachBackend(t, func(t *testing.T, b tensor.Backend) {
		o := DefaultGradScalerOptions()
		o.GrowthInterval = 3
		host, err := NewGradScaler(b, o)
		must(t, err)
		mirror, err := NewGradScaler(b, o)
		must(t, err)
		replica, err := NewGradScaler(b, o)
		must(t, err)
		if !replica.PowersOfTwo() {
			t.Fatal("PyTorch's defaults are powers of two")
		}
		dev, err := replica.OnDevice()
		must(t, err)
		defer dev.Free()
		ha, da := newAdamState(t, b, p), newAdamState(t, b, p)
		lr := func(k int) float32 { return float32(1e-2 * min(1, float64(k+1)/10)) } // warmup over the steps taken
		table := make([]float32, 0, 3*steps)
		for k := range steps {
			r := tensor.AdamWScalars(lr(k), 0.9, 0.999, 0.01, k+1)
			table = append(table, r[:]...)
		}
		tab := tensortest.Upload(t, b, tensor.F32, table, steps, 3)
		defer b.Free(tab)
		record := tensortest.Alloc(t, b, tensor.I32, 1)
		defer b.Free(record)
		taken, grew := 0, false
		grads := make([]float32, p)
		for step := 1; step <= steps; step++ {
			for i := range grads {
				grads[i] = trueGrad(step, i)
				if overflow[step] && i == 3 {
					grads[i] = float32(math.Inf(1))
				}
			}
			// host: backward seeded with the host's scale
			hg := make([]float32, p)
			for i, g := range grads {
				hg[i] = g * host.Scale()
			}
			must(t, b.Upload(ha.grads, hg))
			must(t, host.Unscale([]*tensor.Tensor{ha.grads}))
			scaleBefore := host.Scale()
			skipped, err := host.Step(func() error {
				ha.step++
				return b.AdamW(tensor.AdamWArgs{Params: ha.params, Grads: ha.grads, ExpAvg: ha.m, ExpAvgSq: ha.v,
					LR: lr(taken), Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: ha.step})
			})
			must(t, err)
			must(t, host.Update())
			if !skipped {
				taken++
			}
			grew = grew || host.Scale() > scaleBefore
			// device: the same scaled gradients (the seed's product is exact for a power-of-two scale)
			must(t, b.Upload(da.grads, hg))
			must(t, dev.Unscale([]*tensor.Tensor{da.grads}))
			must(t, b.AdamW(tensor.AdamWArgs{Params: da.params, Grads: da.grads, ExpAvg: da.m, ExpAvgSq: da.v,
				Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Skip: dev.Found, Table: tab, Row: dev.Steps}))
			must(t, dev.Update(record))
			flag := make([]int32, 1)
			must(t, b.Download(flag, record))
			replayed, err := mirror.UpdateFound(flag[0] != 0)
			must(t, err)

			if !slices.Equal(ha.snapshot(t, b), da.snapshot(t, b)) {
				t.Fatalf("step %d: weights or moments differ", step)
			}
			scale, tracker, n, err := dev.Read()
			must(t, err)
			if replayed != skipped || scale != host.Scale() || tracker != host.GrowthTracker() || n != taken ||
				mirror.Scale() != host.Scale() || mirror.GrowthTracker() != host.GrowthTracker() {
				t.Fatalf("step %d: device scale %v tracker %d taken %d, replay skipped %v scale %v; host skipped %v scale %v tracker %d taken %d",
					step, scale, tracker, n, replayed, mirror.Scale(), skipped, host.Scale(), host.GrowthTracker(), taken)
			}
		}
		if !grew {
			t.Error("the scale never grew")
		}

		// The stop: after 2 skipped steps in a row every later step stays skipped.
		dev.MaxSkipped = 2
		before := da.snapshot(t, b)
		for step := range 4 {
			g := make([]float32, p)
			if step < 2 {
				g[0] = float32(math.NaN())
			}
			must(t, b.Upload(da.grads, g))
			must(t, dev.Unscale([]*tensor.Tensor{da.grads}))
			must(t, b.AdamW(tensor.AdamWArgs{Params: da.params, Grads: da.grads, ExpAvg: da.m, ExpAvgSq: da.v,
				Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Skip: dev.Found, Table: tab, Row: dev.Steps}))
			must(t, dev.Update(nil))
		}
		if !slices.Equal(before, da.snapshot(t, b)) {
			t.Error("steps after the max_consecutive_skipped_steps stop changed the weights")
		}
	})
}
