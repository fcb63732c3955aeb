package dist

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWatchAbortsOnAsyncError(t *testing.T) {
	var polls, aborts atomic.Int32
	poll := func() error {
		if polls.Add(1) >= 3 {
			return errors.New("remote process exited or there was a network error")
		}
		return nil
	}
	abort := func() error { aborts.Add(1); return nil }
	select {
	case err := <-Watch(context.Background(), 2, time.Millisecond, poll, abort):
		if err == nil || !strings.Contains(err.Error(), "dist: rank 2: the communicator failed") || !strings.Contains(err.Error(), "remote process exited") {
			t.Errorf("Watch sent %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not report the error")
	}
	if aborts.Load() != 1 {
		t.Errorf("abort called %d times, want 1", aborts.Load())
	}

	ctx, cancel := context.WithCancel(context.Background())
	ch := Watch(ctx, 0, time.Millisecond, func() error { return nil }, abort)
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err, ok := <-ch; ok || err != nil {
		t.Errorf("healthy communicator: got %v, %v; want a closed channel", err, ok)
	}
	if aborts.Load() != 1 {
		t.Errorf("abort called on a healthy communicator")
	}
}
