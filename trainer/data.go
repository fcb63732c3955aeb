package trainer

import (
	"math/rand/v2"

	"github.com/tune-ml/tune/loaders"
)

// Dataset is a set of examples the Trainer reads by index: the training set, the eval set or the inputs of
// Predict. loaders' datasets with a collator satisfy it through a small adapter (recipes builds one).
type Dataset interface {
	// Len returns the number of examples.
	Len() int
	// Batch collates the examples at indices, in that order, into one padded batch (dynamic padding to the
	// longest example). Labels are nil when the dataset has none.
	Batch(indices []int) (*loaders.Batch, error)
}

// epochOrder returns the order in which epoch (from 0) visits the n training examples: a permutation drawn from
// (seed, epoch) when shuffle is set, else 0..n−1 (file order). The permutation is a pure function of its
// arguments, so a resumed run needs to save only the seed and its position; it is drawn with math/rand/v2's
// PCG and is therefore not the order torch's RandomSampler would give for the same seed.
func epochOrder(n int, shuffle bool, seed int64, epoch int) []int {
	if !shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return rand.New(rand.NewPCG(uint64(seed), uint64(epoch))).Perm(n)
}

// microBatches splits order into consecutive micro-batches of size bs (the last may be shorter: transformers'
// DataLoader keeps it, drop_last=False).
func microBatches(order []int, bs int) [][]int {
	var out [][]int
	for i := 0; i < len(order); i += bs {
		out = append(out, order[i:min(i+bs, len(order))])
	}
	return out
}
