package recipes

import (
	"math"
	"strings"
	"testing"
)

// TestWholeNumbers: a fractional value for an integer key is an error naming the line or the override, not
// truncated, and so is a number beyond the integer's range (1e30, which yaml.v3 reports as "cannot unmarshal
// !!float", or -1e20, which it clamps); a float that is a whole number (1e3, 32.0) is accepted, as YAML writes it.
func TestWholeNumbers(t *testing.T) {
	for _, c := range []struct {
		name      string
		text      string
		overrides []string
		want      string // error fragment; "" means valid
		check     func(r *Recipe) bool
	}{
		{"a fractional batch size in the file", minimal("training:\n  per_device_train_batch_size: 32.5\n"), nil,
			"r.yaml:6: training.per_device_train_batch_size: 32.5 is not a whole number", nil},
		{"a fractional lora.r override", minimal(""), []string{"lora.r=8.9"},
			"override lora.r=8.9: lora.r: 8.9 is not a whole number", nil},
		{"a fractional max_steps override", minimal(""), []string{"training.max_steps=2.5"},
			"override training.max_steps=2.5: training.max_steps: 2.5 is not a whole number", nil},
		{"a fractional model.config size", "model:\n  config:\n    hidden_size: 63.9\ntokenizer:\n  path: v.txt\ndata:\n  train: a.tsv\n", nil,
			"r.yaml:3: model.config.hidden_size: 63.9 is not a whole number", nil},
		{"a fractional value for a pointer to an integer (data_seed)", minimal("training:\n  data_seed: 1.5\n"), nil,
			"r.yaml:6: training.data_seed: 1.5 is not a whole number", nil},
		{"32.0 is a whole number", minimal("training:\n  per_device_train_batch_size: 32.0\n"), nil, "",
			func(r *Recipe) bool { return r.Training.PerDeviceTrainBatchSize == 32 }},
		{"1e3 is a whole number", minimal(""), []string{"training.max_steps=1e3"}, "",
			func(r *Recipe) bool { return r.Training.MaxSteps == 1000 }},
		{"a number beyond int's range (override)", minimal(""), []string{"training.max_steps=1e30"},
			"override training.max_steps=1e30: training.max_steps: 1e30 does not fit an integer (at most 9223372036854775807)", nil},
		{"a negative number beyond int's range, which yaml.v3 clamps silently", minimal("training:\n  max_steps: -1e20\n"), nil,
			"r.yaml:6: training.max_steps: -1e20 does not fit an integer (at least -9223372036854775808)", nil},
		{"infinity", minimal(""), []string{"training.max_steps=.inf"}, "training.max_steps: .inf does not fit an integer", nil},
		{"an integer one beyond int's range", minimal(""), []string{"training.max_steps=9223372036854775808"},
			"training.max_steps: 9223372036854775808 does not fit an integer (at most 9223372036854775807)", nil},
		{"int's largest value is accepted (the seed takes any integer)", minimal(""), []string{"training.seed=9223372036854775807"}, "",
			func(r *Recipe) bool { return r.Training.Seed == math.MaxInt64 }},
		{"max_steps past the step bound", minimal(""), []string{"training.max_steps=9223372036854775807"},
			"training.max_steps: must be at most 1e+15 steps (got 9223372036854775807)", nil},
		{"a whole float at int64's edge is accepted", minimal(""), []string{"training.seed=-9.223372036854775808e18"}, "",
			func(r *Recipe) bool { return r.Training.Seed == math.MinInt64 }},
		{"a float key still takes fractions", minimal("training:\n  warmup_steps: 0.5\n"), nil, "",
			func(r *Recipe) bool { return r.Training.WarmupSteps == 0.5 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := decode(c.text, c.overrides...)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !c.check(r) {
					t.Errorf("decoded %+v", r.Training)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

// TestOneDocument: a recipe file is one YAML document; a second one (after ---) is an error naming its line
// rather than silently ignored. A leading --- and a trailing empty document are fine.
func TestOneDocument(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"a second document", minimal("training:\n  seed: 1\n---\ntraining:\n  seed: 2\n"),
			"r.yaml:8: a second YAML document starts here"},
		{"a broken second document", minimal("---\nmodel: [\n"), "r.yaml"},
		{"a leading document marker", "---\n" + minimal(""), ""},
		{"a trailing document marker", minimal("...\n"), ""},
		{"a trailing empty document", minimal("---\n"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(c.text)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

// TestCUDAGraphsKey: training.cuda_graphs is a boolean, decoded strictly: a value that is not one is named
// with its line, a misspelled key with the right one.
func TestCUDAGraphsKey(t *testing.T) {
	for _, c := range []struct {
		name, text, want string
	}{
		{"on", minimal("training:\n  cuda_graphs: true\n"), ""},
		{"not a boolean", minimal("training:\n  cuda_graphs: sometimes\n"), "r.yaml:6: training.cuda_graphs: sometimes is not true or false"},
		{"misspelled", minimal("training:\n  cuda_graph: true\n"), "did you mean 'cuda_graphs'?"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := decode(c.text)
			if c.want == "" {
				if err != nil || !r.Training.CUDAGraphs {
					t.Fatalf("decoded %v, CUDAGraphs %v; want true", err, err == nil && r.Training.CUDAGraphs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}
