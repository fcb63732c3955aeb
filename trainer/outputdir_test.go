package trainer

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckOutputDir(t *testing.T) {
	cases := []struct {
		name      string
		contents  []string // files; a trailing "/" makes a directory
		overwrite bool
		resume    string
		wantInUse bool
	}{
		{"missing output_dir is fine", nil, false, "", false},
		{"unrelated files are fine", []string{"notes.txt", "data/"}, false, "", false},
		{"a finished run is refused", []string{"trainer_state.json"}, false, "", true},
		{"a checkpoint is refused", []string{"checkpoint-500/"}, false, "", true},
		{"overwrite_output_dir allows it", []string{"checkpoint-500/"}, true, "", false},
		{"resuming allows it", []string{"checkpoint-500/"}, false, "true", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			for _, f := range c.contents {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if f[len(f)-1] == '/' {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			a := DefaultTrainingArguments()
			a.OutputDir, a.OverwriteOutputDir, a.ResumeFromCheckpoint = dir, c.overwrite, c.resume
			err := a.CheckOutputDir()
			if got := errors.Is(err, ErrOutputDirInUse); got != c.wantInUse {
				t.Fatalf("CheckOutputDir() = %v, want in-use %v", err, c.wantInUse)
			}
		})
	}
}
