// philox.cuh: the Philox offset base of the step (included by every file whose kernels draw dropout).
//
// Every dropout offset a kernel receives is relative to tune_philox_base, one constant per module that the
// host writes with a stream-ordered copy when the step's base changes (cuda.Backend.SetPhiloxBase; 0 until
// then). A training step captured as a CUDA graph therefore launches the same arguments every step: only this
// constant, written outside the graph before each replay, moves its dropout masks (the counters drawn are
// base + offset, the same bits as an absolute offset).
#pragma once
#include "common.cuh"

extern "C" {
__constant__ u64 tune_philox_base; // unmangled: the host finds it by name (cuModuleGetGlobal)
}
