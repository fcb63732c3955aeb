package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

// TestFinetuneRefusesMultiProcessLaunch checks that a torchrun-style launch with WORLD_SIZE > 1 (which would
// train independent copies into one output_dir) and a malformed launch environment are refused with exit
// status 2 before anything is written.
func TestFinetuneRefusesMultiProcessLaunch(t *testing.T) {
	testutil.IsolateCache(t)
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
			"rank 1 of WORLD_SIZE=2"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "two"}, `WORLD_SIZE="two" is not an integer`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR is not set"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runCLI("finetune", tinyRecipe, "training.output_dir="+out)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.env, code, stderr, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: output_dir was created", c.env)
		}
		for k := range c.env {
			os.Unsetenv(k)
		}
	}
}
