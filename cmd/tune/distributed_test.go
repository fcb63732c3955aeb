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
		// WORLD_SIZE > 1 is refused first (it asked for MASTER_ADDR, then refused; findings5 #13).
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, "rank 0 of WORLD_SIZE=2 (torchrun-style variables are set), but multi-process data-parallel training is not available yet"},
		{map[string]string{"WORLD_SIZE": "1", "RANK": "3"}, "RANK"},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		out := filepath.Join(t.TempDir(), "out")
		for _, cmd := range []string{"finetune", "validate"} { // validate refuses what finetune refuses
			code, _, stderr := runCLI(cmd, tinyRecipe, "training.output_dir="+out)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("%s %v: exit %d, stderr %q; want 2 and %q", cmd, c.env, code, stderr, c.want)
			}
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: output_dir was created", c.env)
		}
		for k := range c.env {
			os.Unsetenv(k)
		}
	}
}
