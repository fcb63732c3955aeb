package recipes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/dirlock"
	"github.com/tune-ml/tune/trainer"
	"github.com/tune-ml/tune/transformer"
)

// checkResume reports, under training.resume_from_checkpoint, a value that names no checkpoint, decided as
// trainer.ResolveCheckpoint decides when training starts (after the model and data have loaded): true or
// latest needs a complete checkpoint-N folder (its manifest matching its files) in training.output_dir; a path
// must be such a folder. CheckFiles calls it.
func (r *Recipe) checkResume(bad func(key, format string, a ...any)) {
	spec, out := r.Training.ResumeFromCheckpoint, r.Training.OutputDir
	if spec == "" {
		return
	}
	const key = "training.resume_from_checkpoint"
	dir, resolveErr := trainer.ResolveCheckpoint(out, spec)
	if resolveErr == nil {
		if msg := r.checkpointKind(dir); msg != "" {
			bad(key, "%s", msg)
		}
		return
	}
	if s := strings.ToLower(spec); s == "true" || s == "latest" {
		if err := dirlock.Check(out); err != nil {
			// A run in progress there has not saved yet: that it is running is what the user needs to know
			// (tester7 F3: "holds no complete checkpoint" led to starting afresh in a folder being written).
			bad("training.output_dir", "%v", err)
			return
		}
		incomplete := ""
		if all, err := trainer.ScanCheckpoints(out); err == nil {
			for _, c := range all {
				incomplete += fmt.Sprintf("; %s is incomplete: %s", filepath.Base(c.Dir), c.Problem)
			}
		}
		bad(key, "%s, but training.output_dir %s holds no complete checkpoint (a %s<step> folder with its %s) to "+
			"resume from%s; name one, or train without resume_from_checkpoint", spec, out, trainer.CheckpointPrefix,
			trainer.ManifestName, incomplete)
		return
	}
	st, err := os.Stat(spec)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		bad(key, "%s does not exist; name a checkpoint folder (%s), or true for the newest in training.output_dir",
			spec, filepath.Join(out, trainer.CheckpointPrefix+"N"))
	case err != nil:
		bad(key, "%v", err)
	case !st.IsDir():
		bad(key, "%s is a file; name a checkpoint folder (%s)", spec, filepath.Join(out, trainer.CheckpointPrefix+"N"))
	default:
		bad(key, "%s", strings.TrimPrefix(resolveErr.Error(), "trainer: resume_from_checkpoint "))
	}
}

// checkpointKind returns what is wrong with resuming this recipe from checkpoint dir, "" when nothing is: a
// LoRA adapter for a recipe without a lora section, a full model for one with it, or a model of another family
// (config.json's model_type) than the recipe's. The Trainer would find out only after the model and data loaded,
// in terms of tensor names ("tensors this model does not have: ...") or a missing adapter_config.json.
func (r *Recipe) checkpointKind(dir string) string {
	adapter := HasAdapter(dir)
	switch {
	case adapter && r.LoRA == nil:
		return fmt.Sprintf("%s holds a LoRA adapter, but the recipe has no lora section (it trains every weight): "+
			"resume with the recipe that made it, or train without resume_from_checkpoint", dir)
	case !adapter && r.LoRA != nil && statOK(filepath.Join(dir, "config.json")):
		return fmt.Sprintf("%s holds a full model, not a LoRA adapter, but the recipe has a lora section: resume "+
			"with the recipe that made it, or train without resume_from_checkpoint", dir)
	case adapter:
		return ""
	}
	f, err := transformer.Lookup(dir)
	if err != nil {
		return "" // the Trainer reports what it cannot read
	}
	want := "bert" // model.config builds a BERT
	if r.Model.Path != "" {
		g, err := transformer.Lookup(r.Model.Path)
		if err != nil {
			return ""
		}
		want = g.Name
	}
	if f.Name != want {
		return fmt.Sprintf("%s holds a %s model (its config.json), but the recipe trains a %s: resume with the "+
			"recipe that made it, or train without resume_from_checkpoint", dir, f.Name, want)
	}
	return ""
}

// statOK reports whether p exists.
func statOK(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
