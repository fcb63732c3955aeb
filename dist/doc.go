// Package dist is tune's process-group layer for data-parallel training, above the backends: which rank this
// process is (Env, read from torchrun's environment variables), how rank 0 hands a communicator id to the
// others (Rendezvous, over TCP on MASTER_ADDR:MASTER_PORT), and how each rank's share of the data is chosen
// (Shard, with torch.utils.data.DistributedSampler's semantics). It imports only the standard library; the
// NCCL communicator itself is cuda.Comm, made from the id that Rendezvous delivers:
//
//	env, err := dist.FromEnv(os.Getenv)        // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//	var id cuda.UniqueID
//	if env.Rank == 0 {
//		id, err = cuda.NewUniqueID()
//	}
//	got, err := dist.Rendezvous(ctx, env, id[:], 5*time.Minute) // every rank gets rank 0's bytes
//	copy(id[:], got)
//	comm, err := cuda.NewComm(backend, id, env.WorldSize, env.Rank)
//
// See docs/DISTRIBUTED.md for what exists and what is still missing (the trainer's gradient all-reduce).
package dist
