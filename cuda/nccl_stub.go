//go:build !cuda

package cuda

import (
	"fmt"

	"github.com/tune-ml/tune/tensor"
)

// errNoNCCL is what every NCCL entry point returns in a build without CUDA support.
var errNoNCCL = fmt.Errorf("cuda: NCCL needs a binary built with CUDA support (rebuild with `make cuda`, i.e. go build -tags cuda): %w", tensor.ErrNoDevice)

// NCCLVersion opens NCCL and returns the file loaded and its version code; without CUDA support it fails
// with an error wrapping tensor.ErrNoDevice.
func NCCLVersion() (path string, version int, err error) { return "", 0, errNoNCCL }

// NewUniqueID makes the id of a new NCCL communicator; without CUDA support it fails.
func NewUniqueID() (UniqueID, error) { return UniqueID{}, errNoNCCL }

// Comm is one rank's NCCL communicator; without CUDA support none can be made.
type Comm struct{}

// NewComm joins an NCCL communicator; without CUDA support it fails with an error wrapping
// tensor.ErrNoDevice.
func NewComm(b tensor.Backend, id UniqueID, nranks, rank int) (*Comm, error) { return nil, errNoNCCL }

// Rank returns this communicator's rank (0 here).
func (c *Comm) Rank() int { return 0 }

// Size returns the number of ranks (0 here).
func (c *Comm) Size() int { return 0 }

// AllReduce reduces tensors across the ranks; without CUDA support it fails.
func (c *Comm) AllReduce(op ReduceOp, ts ...*tensor.Tensor) error { return errNoNCCL }

// AsyncError reports the communicator's asynchronous error; without CUDA support there is none to report.
func (c *Comm) AsyncError() error { return nil }

// Abort ends the communicator; without CUDA support there is nothing to end.
func (c *Comm) Abort() error { return nil }

// Close frees the communicator; without CUDA support there is nothing to free.
func (c *Comm) Close() error { return nil }
