package llama

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/transformer"
)

// TestLoadRefusesAConfigLargerThanItsWeights: a config.json edited to describe more layers, or far more
// parameters, than the checkpoint beside it holds is refused before the model is allocated (which would
// otherwise allocate what the file says: num_hidden_layers 10000000 took 12 GiB in 35 s): more layers by the
// key and what the checkpoint holds, other sizes by the tensors of another shape, each with the checkpoint's
// shape and the config's, as bad input (tester10 F1: a config of far more parameters was refused by its
// parameter count alone, naming no tensor, and tune inspect exited 1).
func TestLoadRefusesAConfigLargerThanItsWeights(t *testing.T) {
	b := cpuBackend()
	dir := t.TempDir()
	if err := newModel(t, b, tinyConfig(t, "llama"), 1).Save(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, loaders.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key   string
		value int
		want  []string
	}{
		{"num_hidden_layers", 3, []string{"num_hidden_layers 3", "holds 2 layers"}},
		{"intermediate_size", 24 * 40, []string{"tensors of another shape", "model.layers.0.mlp.down_proj.weight: checkpoint [16 24], model [16 960]"}},
		{"intermediate_size", 40, []string{"tensors of another shape", "mlp.down_proj.weight"}},
		{"vocab_size", 100_000, []string{"2 tensors of another shape", "model.embed_tokens.weight: checkpoint ["}},
	} {
		t.Run(c.key, func(t *testing.T) {
			var cfg map[string]any
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg[c.key] = c.value
			edited, _ := json.Marshal(cfg)
			d := t.TempDir()
			for _, f := range []string{loaders.SafetensorsWeightsName} {
				w, _ := os.ReadFile(filepath.Join(dir, f))
				os.WriteFile(filepath.Join(d, f), w, 0o644)
			}
			os.WriteFile(filepath.Join(d, loaders.ConfigName), edited, 0o644)
			_, _, err := LoadPretrained(d, b, transformer.LoadOptions{})
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(c.want, "does not describe these weights") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to say %q", err, w)
				}
			}
			// CheckPretrained (tune inspect's check) finds the same problem without loading.
			if !badinput.Is(err) {
				t.Errorf("%v is not marked as bad input", err)
			}
			if _, cerr := checkPretrained(t, d); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckPretrained: %v\nwant LoadPretrained's error %v", cerr, err)
			}
		})
	}
	r, err := checkPretrained(t, dir)
	if err != nil || r.Matched == 0 || len(r.Missing)+len(r.Unexpected)+len(r.Mismatched) > 0 {
		t.Errorf("CheckPretrained of the saved model: %+v, %v; want every tensor matched", r, err)
	}
}

// checkPretrained is CheckPretrained of the checkpoint in dir.
func checkPretrained(t *testing.T, dir string) (*transformer.LoadReport, error) {
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	return CheckPretrained(dir, ck)
}
