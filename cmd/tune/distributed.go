package main

import (
	"fmt"

	"github.com/tune-ml/tune/dist"
)

// checkSingleProcess refuses a torchrun-style launch (RANK/WORLD_SIZE set, WORLD_SIZE > 1): without the
// gradient all-reduce each rank would train its own copy of the model into the same output_dir. A malformed
// environment is refused too, naming the variable. docs/DISTRIBUTED.md says what exists and what is missing.
func checkSingleProcess(getenv func(string) string) error {
	env, err := dist.FromEnv(getenv)
	if err != nil {
		return usageError{err}
	}
	if env.Distributed() {
		return usageError{fmt.Errorf("tune finetune: this is rank %d of WORLD_SIZE=%d (torchrun-style variables are set), but multi-process data-parallel training is not available yet: the gradient all-reduce over NCCL is still missing (see docs/DISTRIBUTED.md); run one process (unset RANK, WORLD_SIZE, LOCAL_RANK)", env.Rank, env.WorldSize)}
	}
	return nil
}
