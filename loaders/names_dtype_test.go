package loaders

import (
	"errors"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
)

// TestMapBertCheckpointWrongDType checks that a tensor under an expected name whose dtype is not F32, F16 or
// BF16 is reported in WrongDType (not matched, not loaded, not missing), makes the report not OK, and gives a
// bad-input error wrapping ErrDTypeMismatch that names it, with advice that depends on the kind of dtype.
func TestMapBertCheckpointWrongDType(t *testing.T) {
	c := tinyConfig(t)
	seq := BertSequenceClassificationTensors(c)
	for _, tc := range []struct {
		dtype  map[string]string
		advice string
	}{
		{map[string]string{"bert.embeddings.LayerNorm.bias": "I32", "classifier.bias": "I64"}, "a weight stored as integers is a damaged or wrongly exported file"},
		{map[string]string{"bert.pooler.dense.weight": "F64"}, "convert the checkpoint to F32, F16 or BF16"},
	} {
		ck := infos(seq, nil)
		for i := range ck {
			if d, ok := tc.dtype[ck[i].Name]; ok {
				ck[i].DType = d
			}
		}
		source, r := MapBertCheckpoint(seq, ck, c)
		if r.OK() || len(r.WrongDType) != len(tc.dtype) || r.Matched != len(seq)-len(tc.dtype) || len(r.Missing) != 0 {
			t.Fatalf("report:\n%s", r)
		}
		err := r.Err()
		if !errors.Is(err, ErrDTypeMismatch) || !badinput.Is(err) || !strings.Contains(err.Error(), tc.advice) {
			t.Errorf("Err: %v", err)
		}
		for name, d := range tc.dtype {
			if _, ok := source[name]; ok {
				t.Errorf("%s is mapped: it would be loaded", name)
			}
			want := name + " is " + d + ", but the model needs a floating-point tensor (F32, F16 or BF16) here"
			if !strings.Contains(err.Error(), want) || !strings.Contains(r.String(), "\nwrong dtype: "+want) {
				t.Errorf("%q / %q lack %q", err, r, want)
			}
		}
		if !strings.Contains(r.String(), ", 0 tied, "+string(rune('0'+len(tc.dtype)))+" of another dtype") {
			t.Errorf("summary: %s", r)
		}
	}
	// A clean checkpoint's summary line is unchanged.
	if _, r := MapBertCheckpoint(seq, infos(seq, nil), c); !r.OK() || strings.Contains(r.String(), "dtype") {
		t.Errorf("clean report: %s", r)
	}
}
