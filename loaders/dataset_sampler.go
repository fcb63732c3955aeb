package loaders

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sort"
)

// SamplerOptions chooses the order in which a training epoch visits the examples.
type SamplerOptions struct {
	// Shuffle permutes the examples each epoch; false keeps file order.
	Shuffle bool
	// Seed fixes the permutation: the same seed, epoch and options give the same order on every machine.
	Seed uint64
	// GroupByLength puts examples of similar length together (HF group_by_length): see EpochOrder.
	GroupByLength bool
	// BatchSize is the per-device batch size, needed by GroupByLength.
	BatchSize int
	// Lengths holds each example's token count (Collator.Lengths), needed by GroupByLength.
	Lengths []int
}

// EpochOrder returns the visiting order of n examples for epoch (0-based).
//
// Shuffling is a Fisher–Yates shuffle (from the last position down, swapping position i with a uniform j in
// [0, i]) driven by a PCG-DXSM generator from math/rand/v2 seeded with (Seed, epoch); j is drawn with
// Lemire's unbiased multiply-and-reject method on the generator's 64-bit outputs. Both are written out here so
// the order does not depend on the Go release. The order differs from PyTorch's RandomSampler, whose
// generator tune does not reproduce.
//
// With GroupByLength the order follows transformers' get_length_grouped_indices: a shuffled order (as above,
// or file order without Shuffle) is cut into megabatches of mega_batch_mult × BatchSize examples, where
// mega_batch_mult = min(n / (4 × BatchSize), 50), at least 1; each megabatch is sorted by length, longest
// first (stable); and the longest example of all is swapped to the very front, so a first batch that runs out
// of memory does so at once.
func EpochOrder(n, epoch int, opts SamplerOptions) ([]int, error) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if opts.Shuffle {
		pcg := rand.NewPCG(opts.Seed, uint64(epoch))
		for i := n - 1; i > 0; i-- {
			j := int(boundedUint64(pcg, uint64(i+1)))
			order[i], order[j] = order[j], order[i]
		}
	}
	if !opts.GroupByLength {
		return order, nil
	}
	if len(opts.Lengths) != n {
		return nil, fmt.Errorf("loaders: group_by_length needs %d lengths, got %d", n, len(opts.Lengths))
	}
	if opts.BatchSize < 1 {
		return nil, fmt.Errorf("loaders: group_by_length needs a batch size >= 1, got %d", opts.BatchSize)
	}
	mult := min(n/(opts.BatchSize*4), 50)
	if mult == 0 {
		mult = 1
	}
	size := mult * opts.BatchSize
	var megabatches [][]int
	for lo := 0; lo < n; lo += size {
		mb := order[lo:min(lo+size, n)]
		sort.SliceStable(mb, func(a, b int) bool { return opts.Lengths[mb[a]] > opts.Lengths[mb[b]] })
		megabatches = append(megabatches, mb)
	}
	if len(megabatches) > 0 {
		best := 0
		for k, mb := range megabatches {
			if opts.Lengths[mb[0]] > opts.Lengths[megabatches[best][0]] {
				best = k
			}
		}
		megabatches[0][0], megabatches[best][0] = megabatches[best][0], megabatches[0][0]
	}
	return order, nil
}

// boundedUint64 returns a uniform value in [0, n) from src (Lemire, "Fast Random Integer Generation in an
// Interval", 2019).
func boundedUint64(src rand.Source, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// Batches cuts order into consecutive batches of batchSize indices; the last batch is shorter unless
// dropLast (HF dataloader_drop_last) removes it.
func Batches(order []int, batchSize int, dropLast bool) [][]int {
	if batchSize < 1 {
		return nil
	}
	var out [][]int
	for lo := 0; lo < len(order); lo += batchSize {
		hi := lo + batchSize
		if hi > len(order) {
			if dropLast {
				break
			}
			hi = len(order)
		}
		out = append(out, order[lo:hi:hi])
	}
	return out
}
