package detweights

import (
	"math"
	"testing"
)

func TestSplitMix64KnownAnswers(t *testing.T) {
	// Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c): the first three next() values.
	want := []uint64{0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F}
	state := uint64(0)
	for i, w := range want {
		got := SplitMix64(state)
		state += 0x9E3779B97F4A7C15
		if got != w {
			t.Errorf("output %d = %#x, want %#x", i, got, w)
		}
	}
}

func TestFNV1a64KnownAnswers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0xCBF29CE484222325}, // the offset basis
		{"a", 0xAF63DC4C8601EC8C},
		{"foobar", 0x85944171F73967E8},
	} {
		if got := FNV1a64(c.in); got != c.want {
			t.Errorf("FNV1a64(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

func TestValuesRoles(t *testing.T) {
	for _, c := range []struct {
		name   string
		shape  []int
		lo, hi float64 // every value must lie in [lo, hi)
	}{
		{"bert.embeddings.LayerNorm.weight", []int{64}, 0.9, 1.1},
		{"bert.encoder.layer.0.attention.self.query.bias", []int{64}, -0.1, 0.1},
		{"bert.embeddings.word_embeddings.weight", []int{10, 64}, -1, 1},
		{"bert.encoder.layer.0.intermediate.dense.weight", []int{128, 64}, -math.Sqrt(3.0 / 64), math.Sqrt(3.0 / 64)},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Values(7, c.name, c.shape)
			var sum, sq float64
			for _, x := range v {
				if float64(x) < c.lo || float64(x) >= c.hi {
					t.Fatalf("value %v outside [%v, %v)", x, c.lo, c.hi)
				}
				sum += float64(x)
				sq += float64(x) * float64(x)
			}
			// A uniform draw has variance (hi−lo)²/12; check the spread is not degenerate (within 40%).
			n := float64(len(v))
			variance := sq/n - (sum/n)*(sum/n)
			want := (c.hi - c.lo) * (c.hi - c.lo) / 12
			if variance < 0.6*want || variance > 1.4*want {
				t.Errorf("variance %v, want about %v", variance, want)
			}
		})
	}
	a, b := Values(1, "x.weight", []int{4, 4}), Values(2, "x.weight", []int{4, 4})
	if a[0] == b[0] && a[1] == b[1] {
		t.Errorf("seeds 1 and 2 give the same values %v", a[:2])
	}
}

// TestValuesMatchNumpy checks values printed by tools/reference/detweights.py (`python3 detweights.py`), the numpy
// implementation the golden script loads into transformers; a mismatch would make every golden test fail.
func TestValuesMatchNumpy(t *testing.T) {
	want := []float32{-0.039534762501716614, 0.19774150848388672, 0.20375198125839233, 0.18572795391082764}
	got := Values(7, "bert.encoder.layer.0.intermediate.dense.weight", []int{128, 64})
	for i, w := range want {
		if got[i] != w {
			t.Errorf("value %d = %v, want %v (numpy)", i, got[i], w)
		}
	}
}
