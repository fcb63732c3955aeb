package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/dist"
)

// checkSingleProcess refuses a torchrun-style launch (RANK/WORLD_SIZE set, WORLD_SIZE > 1): without the
// gradient all-reduce each rank would train its own copy of the model into the same output_dir. A malformed
// environment is refused too, naming the variable. docs/DISTRIBUTED.md says what exists and what is missing.
//
// WORLD_SIZE > 1 is refused first, whatever the other variables say: completing them (MASTER_ADDR, ...) only
// to learn that no multi-process run exists was the way it went.
func checkSingleProcess(getenv func(string) string) error {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("WORLD_SIZE"))); err == nil && n > 1 {
		rank := ""
		if r := strings.TrimSpace(getenv("RANK")); r != "" {
			rank = "rank " + r + " of "
		}
		return usageError{fmt.Errorf("tune finetune: this is %sWORLD_SIZE=%d (torchrun-style variables are set), but multi-process data-parallel training is not available yet: the gradient all-reduce over NCCL is still missing (see docs/DISTRIBUTED.md); run one process (unset RANK, WORLD_SIZE, LOCAL_RANK)", rank, n)}
	}
	env, err := dist.FromEnv(getenv)
	if err != nil {
		return usageError{err}
	}
	if env.Distributed() {
		return usageError{fmt.Errorf("tune finetune: this is rank %d of WORLD_SIZE=%d (torchrun-style variables are set), but multi-process data-parallel training is not available yet: the gradient all-reduce over NCCL is still missing (see docs/DISTRIBUTED.md); run one process (unset RANK, WORLD_SIZE, LOCAL_RANK)", env.Rank, env.WorldSize)}
	}
	return nil
}
