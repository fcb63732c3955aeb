package cuda

// UniqueID is NCCL's ncclUniqueId: 128 opaque bytes made by NewUniqueID on one rank (rank 0) and handed to
// every other rank (package dist does it over TCP) before each calls NewComm with it.
type UniqueID [128]byte

// ReduceOp is an NCCL reduction (ncclRedOp_t; values as in nccl.h of NCCL 2.x).
type ReduceOp int

const (
	// Sum adds the ranks' values (ncclSum).
	Sum ReduceOp = 0
	// Max takes the largest value (ncclMax): what agrees a found-inf flag across ranks, so that every rank
	// skips or takes the FP16 step together.
	Max ReduceOp = 2
	// Avg averages them (ncclAvg, NCCL 2.10+): the sum divided by the number of ranks, as DDP averages
	// gradients.
	Avg ReduceOp = 4
)

// String returns the NCCL name of op.
func (op ReduceOp) String() string {
	switch op {
	case Sum:
		return "ncclSum"
	case Max:
		return "ncclMax"
	case Avg:
		return "ncclAvg"
	}
	return "ncclRedOp(?)"
}
