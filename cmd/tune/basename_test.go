package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
	"github.com/tune-ml/tune/lora"
)

// TestEmbeddedRecipeRecordsALoadableBase: a LoRA run of an embedded recipe records as base_model_name_or_path
// the absolute path of the copy tune unpacked into its cache (/root/.cache/tune/recipes-<hash>/data/tiny-chat),
// a directory PEFT's from_pretrained can load; the recipe's own "data/tiny-chat", recorded for a while, is
// resolved by PEFT against the working directory and named nothing (tester4). `tune merge --model
// recipes/data/tiny-chat` (the repository's copy) is silent for either form (tester2/tester3: it warned that
// the adapter "gives a wrong model"): a base inside the unpacked copy is compared as the recipe writes it.
func TestEmbeddedRecipeRecordsALoadableBase(t *testing.T) {
	testutil.IsolateCache(t)
	out := filepath.Join(t.TempDir(), "run")
	code, _, errOut := runTune(t, "finetune", "tiny-chat", "lora.r=4", "training.max_steps=1", "training.eval_strategy=no",
		"training.save_strategy=no", "training.output_dir="+out)
	if code != exitOK {
		t.Fatalf("finetune: exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(filepath.Join(out, lora.AdapterConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var ac struct {
		Base string `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(data, &ac); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny-chat")
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	unpacked, err := filepath.Glob(filepath.Join(cache, "tune", "recipes-*", "data", "tiny-chat"))
	if err != nil || len(unpacked) != 1 {
		t.Fatalf("the unpacked embedded copy: %v %v", unpacked, err)
	}
	if ac.Base != unpacked[0] || !filepath.IsAbs(ac.Base) {
		t.Errorf("base_model_name_or_path %q, want the unpacked copy's absolute path %s", ac.Base, unpacked[0])
	}
	cfg, _, err := lora.ReadAdapterConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"data/tiny-chat", unpacked[0]} {
		if err := lora.WriteAdapterConfig(out, cfg, base); err != nil {
			t.Fatal(err)
		}
		code, _, errOut = runTune(t, "merge", "--model", model, "--adapter", out, "--output", filepath.Join(t.TempDir(), "m"))
		if code != exitOK || strings.Contains(errOut, "trained on") {
			t.Errorf("merge of an adapter trained on %s onto %s: exit %d, stderr %q; want no warning", base, model, code, errOut)
		}
	}
}
