package recipes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/trainer"
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
	_, resolveErr := trainer.ResolveCheckpoint(out, spec)
	if resolveErr == nil {
		return
	}
	const key = "training.resume_from_checkpoint"
	if s := strings.ToLower(spec); s == "true" || s == "latest" {
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
