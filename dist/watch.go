package dist

import (
	"context"
	"fmt"
	"time"
)

// Watch polls a communicator's asynchronous error (cuda.Comm.AsyncError) every interval until ctx ends. On
// the first error it calls abort (cuda.Comm.Abort, which ends collectives blocked on a dead peer instead of
// hanging) and sends the error, naming rank, on the returned channel, which is closed when Watch stops.
func Watch(ctx context.Context, rank int, interval time.Duration, poll func() error, abort func() error) <-chan error {
	out := make(chan error, 1)
	go func() {
		defer close(out)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := poll(); err != nil {
					err = fmt.Errorf("dist: rank %d: the communicator failed (a peer died or the network failed), aborting: %w", rank, err)
					if aerr := abort(); aerr != nil {
						err = fmt.Errorf("%w; abort: %v", err, aerr)
					}
					out <- err
					return
				}
			}
		}
	}()
	return out
}
