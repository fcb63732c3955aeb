// fakenccl.c: a stand-in for libnccl.so.2 with NCCL 2.x's C signatures, compiled by TestNCCLShim so that the
// shim's binding, its by-value ncclUniqueId and its error strings are tested on a machine without NCCL.
#include <stdlib.h>
#include <stddef.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int rank; } *ncclComm_t;

int ncclGetVersion(int *v) { *v = 22803; return 0; }
const char *ncclGetErrorString(int code) {
	switch (code) {
	case 0: return "no error";
	case 4: return "invalid argument (fake)";
	case 6: return "remote process exited or there was a network error (fake)";
	}
	return "unknown (fake)";
}
const char *ncclGetLastError(ncclComm_t c) { return "fake last error"; }
int ncclGetUniqueId(ncclUniqueId *id) {
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 3 + 1);
	return 0;
}
// ncclCommInitRank accepts only the id ncclGetUniqueId made, passed by value.
int ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	for (int i = 0; i < 128; i++)
		if (id.internal[i] != (char)(i * 3 + 1)) return 4;
	if (rank < 0 || rank >= nranks) return 4;
	*comm = malloc(sizeof **comm);
	(*comm)->rank = rank;
	return 0;
}
int ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st) { return 0; }
int ncclGroupStart(void) { return 0; }
int ncclGroupEnd(void) { return 0; }
// ncclCommGetAsyncError reports a dead peer on rank 1's communicator.
int ncclCommGetAsyncError(ncclComm_t c, int *e) { *e = c->rank == 1 ? 6 : 0; return 0; }
int ncclCommAbort(ncclComm_t c) { free(c); return 0; }
int ncclCommDestroy(ncclComm_t c) { free(c); return 0; }
