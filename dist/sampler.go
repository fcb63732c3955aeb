package dist

// Shard returns rank's share of one epoch's order, with the semantics of torch.utils.data.DistributedSampler
// (torch/utils/data/distributed.py) and drop_last false: every rank starts from the same order (the same
// shuffle seed and epoch), the order is padded to a multiple of world by repeating its own first indices
// (as many times as needed), and rank takes positions rank, rank+world, rank+2·world, ... So the shards are
// disjoint except for the padding, every rank gets ceil(len(order)/world) indices, and every rank takes the
// same number of steps. An empty order gives empty shards.
func Shard(order []int, rank, world int) []int {
	if world <= 1 {
		return order
	}
	n := len(order)
	if n == 0 {
		return nil
	}
	per := (n + world - 1) / world
	out := make([]int, 0, per)
	for i := rank; i < per*world; i += world {
		out = append(out, order[i%n])
	}
	return out
}

// ShardLen returns the number of indices Shard gives each rank for an order of n: ceil(n/world).
func ShardLen(n, world int) int {
	if world <= 1 {
		return n
	}
	return (n + world - 1) / world
}
