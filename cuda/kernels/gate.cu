// gate.cu: the gate of Backend.TimeGated (cuda/gate.go). One thread spins on a word of page-locked host memory
// (device-visible through unified addressing) until the host writes the value it waits for, so that the work
// queued behind it starts only after the host has queued all of it: the event recorded after the gate then
// times the device's work alone, without the host's gaps between launches.
#include "common.cuh"

// gate_wait waits until *flag == want or timeout_ns nanoseconds of the device's global timer have passed (an
// op that makes the host wait for the stream cannot release the gate; the timeout lets it go on), and sets
// *timedout to 1 in the second case. Launch it with one block of one thread.
extern "C" __global__ void gate_wait(const volatile u32 *flag, u32 want, i64 timeout_ns, u32 *timedout) {
	u64 t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	while (*flag != want) {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		if ((i64)(t - t0) > timeout_ns) {
			*timedout = 1;
			return;
		}
#if __CUDA_ARCH__ >= 700
		__nanosleep(256);
#endif
	}
}
