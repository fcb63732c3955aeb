package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tune-ml/tune/internal/testutil"
)

func TestCp(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "my-tiny.yaml")

	code, out, errOut := runTune(t, "cp", "tiny", dest)
	if code != exitOK {
		t.Fatalf("cp tiny: exit %d: %s", code, errOut)
	}
	for _, f := range []string{"my-tiny.yaml", "data/tiny/train.tsv", "data/tiny/dev.tsv", "data/tiny/tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
			t.Errorf("cp did not write %s: %v (output %s)", f, err, out)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
	// The copy runs as is: its relative data paths point at the copied data.
	if code, _, errOut := runTune(t, "validate", dest); code != exitOK {
		t.Fatalf("the copy does not validate: %s", errOut)
	}
	// Copying again is a no-op.
	if code, out, _ := runTune(t, "cp", "tiny", dest); code != exitOK || !strings.Contains(out, "already a copy") {
		t.Errorf("second cp: exit %d, %q", code, out)
	}
	// An edited copy is not overwritten without --force.
	if err := os.WriteFile(dest, []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runTune(t, "cp", "tiny", dest)
	if b, _ := os.ReadFile(dest); code != exitUsage || string(b) != "# mine\n" || !strings.Contains(errOut, "--force") {
		t.Errorf("cp over an edited file: exit %d, stderr %q, file now %q", code, errOut, b)
	}
	if code, _, _ := runTune(t, "cp", "--force", "tiny", dest); code != exitOK {
		t.Errorf("cp --force: exit %d", code)
	}
	if b, _ := os.ReadFile(dest); !strings.HasPrefix(string(b), "# tiny:") {
		t.Errorf("--force did not overwrite: %q", b[:min(len(b), 40)])
	}
	// A directory destination gets NAME.yaml; bert reads no embedded data, so only the recipe is written.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runTune(t, "cp", "bert", sub); code != exitOK || strings.Count(out, "wrote") != 1 {
		t.Errorf("cp bert DIR: exit %d, %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(sub, "bert.yaml")); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{{"cp", "tiny"}, {"cp", "nosuch", dest}} {
		if code, _, _ := runTune(t, bad...); code != exitUsage {
			t.Errorf("tune %v: exit %d, want 2", bad, code)
		}
	}
}

// TestCpIntoDirectory: a DEST ending in a slash, or naming an existing directory, means "into that directory":
// it is created when missing (inside an existing folder) and the copy is DEST/NAME.yaml, with the embedded
// data beside it.
func TestCpIntoDirectory(t *testing.T) {
	testutil.IsolateCache(t)
	for _, c := range []struct {
		name, recipe, dest string
		mkdir              bool
		want               []string // files under the directory
	}{
		{"a new directory named with a trailing slash", "bert", "experiments/", false, []string{"bert.yaml"}},
		{"a new directory inside an existing one, with its data", "tiny", "a/b/", false, []string{"tiny.yaml", "data/tiny/train.tsv", "data/tiny/vocab.txt"}},
		{"an existing directory without a slash", "tiny", "exp", true, []string{"tiny.yaml", "data/tiny/dev.tsv"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dest := filepath.Join(root, filepath.FromSlash(c.dest))
			if strings.HasSuffix(c.dest, "/") {
				dest += string(filepath.Separator)
			}
			os.Mkdir(filepath.Join(root, "a"), 0o755)
			if c.mkdir {
				if err := os.Mkdir(dest, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := runTune(t, "cp", c.recipe, dest)
			if code != exitOK {
				t.Fatalf("tune cp %s %s: exit %d\n%s%s", c.recipe, dest, code, out, errOut)
			}
			for _, f := range c.want {
				if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(f))); err != nil {
					t.Errorf("%s: %v (output %s)", f, err, out)
				}
			}
			if ents, _ := filepath.Glob(filepath.Join(dest, ".*")); len(ents) > 0 {
				t.Errorf("temporary files left: %v", ents)
			}
			if code, _, errOut := runTune(t, "validate", "--no-files", filepath.Join(dest, c.recipe+".yaml")); code != exitOK {
				t.Errorf("the copy does not validate: %s", errOut)
			}
		})
	}
}

// TestCpAsCpDoes: cp creates no missing folders (a mistyped DEST is refused, naming the folder, and nothing is
// written), a NAME given as a path says to give the recipe's name, and a copy whose paths point into tune's
// source tree says which keys to edit or override.
func TestCpAsCpDoes(t *testing.T) {
	testutil.IsolateCache(t)
	root := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tiny", filepath.Join(root, "deep", "nested", "x.yaml")}, "there is no folder " + filepath.Join(root, "deep", "nested") + "; create it first"},
		{[]string{"tiny", filepath.Join(root, "deep", "nested") + "/"}, "there is no folder " + filepath.Join(root, "deep") + "; create it first"},
		{[]string{"recipes/bert.yaml", filepath.Join(root, "b.yaml")}, "recipes/bert.yaml is a path: to copy the embedded bert recipe write: tune cp bert "},
		{[]string{"tny", filepath.Join(root, "b.yaml")}, `no embedded recipe named "tny"`},
	} {
		code, _, errOut := runTune(t, append([]string{"cp"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "file does not exist") {
			t.Errorf("tune cp %s: exit %d %s", c.args, code, errOut)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("refused copies wrote %v", ents)
	}
	dest := filepath.Join(root, "mybert.yaml")
	code, out, errOut := runTune(t, "cp", "bert", dest)
	if code != exitOK || !strings.Contains(out, "note: "+dest+" names model.path, data.train, data.eval by paths relative to the recipes/ folder") ||
		!strings.Contains(out, "tune finetune "+dest+" model.path=DIR data.train=FILE data.eval=FILE") {
		t.Fatalf("tune cp bert: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := runTune(t, "cp", "tiny", filepath.Join(root, "t.yaml")); strings.Contains(out, "note:") {
		t.Errorf("tiny runs from anywhere, yet cp noted: %s", out)
	}
}

// TestCpRefusesWhatIsNotAFile: DEST "" is bad usage, and a DEST that exists but is not a regular file (a named
// pipe here; a device such as /dev/null the same) is refused even with --force, left as it was: before, cp
// read the pipe and blocked, and with --force renamed the recipe over a device node (mknod c 1 3 became a
// regular file).
func TestCpRefusesWhatIsNotAFile(t *testing.T) {
	testutil.IsolateCache(t)
	dir := t.TempDir()
	if code, _, errOut := runTune(t, "cp", "tiny", ""); code != exitUsage || !strings.Contains(errOut, "DEST is empty") {
		t.Errorf(`cp tiny "": exit %d, %q`, code, errOut)
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	for _, args := range [][]string{{"cp", "tiny", fifo}, {"cp", "--force", "tiny", fifo}} {
		done := make(chan struct{})
		var code int
		var errOut string
		go func() { code, _, errOut = runTune(t, args...); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			// Unblock the reader so that the test ends, then fail.
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			<-done
			t.Fatalf("tune %v blocked on the named pipe", args)
		}
		st, err := os.Lstat(fifo)
		if code != exitUsage || !strings.Contains(errOut, "not a regular file (a named pipe)") || err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("tune %v: exit %d, %q; the pipe is now %v (%v)", args, code, errOut, st.Mode(), err)
		}
	}
}
