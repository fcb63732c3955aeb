package trainer

import (
	"fmt"

	"github.com/tune-ml/tune/loaders"
)

// Dataset is a set of examples the Trainer reads by index: the training set, the eval set or the inputs of
// Predict. A loaders.Dataset with its loaders.Collator satisfies it through a small adapter
// (datasets.Text; datasets.SFT for SFT data).
type Dataset interface {
	// Len returns the number of examples.
	Len() int
	// Batch collates the examples at indices, in that order, into one padded batch (dynamic padding to the
	// longest example). Labels are nil when the dataset has none.
	Batch(indices []int) (*loaders.Batch, error)
}

// Orderer is implemented by a training Dataset that chooses the order of its epochs itself, for example
// grouping examples of similar length (group_by_length). The order must be a pure function of the arguments:
// resuming relies on drawing the same order again.
type Orderer interface {
	// EpochOrder returns the indices of every example in the order epoch (from 0) visits them, given the
	// run's shuffle flag, data seed and per_device_train_batch_size (loaders.EpochOrder is the default).
	EpochOrder(epoch int, shuffle bool, seed uint64, batchSize int) ([]int, error)
}

// epochOrder returns the order in which epoch (from 0) visits ds: the dataset's own (Orderer), else
// loaders.EpochOrder, a permutation drawn from (seed, epoch) when shuffle is set and file order otherwise.
// It is a pure function of its arguments, so a resumed run needs to save only the seed and its position; it is
// not the order torch's RandomSampler would give for the same seed.
func epochOrder(ds Dataset, shuffle bool, seed int64, epoch, batchSize int) ([]int, error) {
	var order []int
	var err error
	if o, ok := ds.(Orderer); ok {
		order, err = o.EpochOrder(epoch, shuffle, uint64(seed), batchSize)
	} else {
		order, err = loaders.EpochOrder(ds.Len(), epoch, loaders.SamplerOptions{Shuffle: shuffle, Seed: uint64(seed)})
	}
	if err != nil {
		return nil, fmt.Errorf("trainer: order of epoch %d: %w", epoch, err)
	}
	if len(order) != ds.Len() {
		return nil, fmt.Errorf("trainer: order of epoch %d has %d indices for %d examples", epoch, len(order), ds.Len())
	}
	return order, nil
}
