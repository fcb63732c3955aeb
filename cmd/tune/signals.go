package main

import (
	"context"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// stopSignal is the signal that stopped the command through notifyStop (0: none), for its exit status.
var stopSignal atomic.Int32

// notifyStop returns a context that is canceled when the process gets SIGINT (Ctrl-C) or SIGTERM (what
// timeout(1), Slurm at the time limit, Kubernetes and systemd send before SIGKILL), and the function that stops
// listening. The signal is recorded for interruptCode. As with signal.NotifyContext, a second signal while the
// command winds down is ignored: the step in flight ends, the lock is released and the message names the last
// checkpoint.
func notifyStop(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			if n, ok := s.(syscall.Signal); ok {
				stopSignal.Store(int32(n))
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}

// interruptCode is the exit status of a command stopped by a signal: 128 + the signal's number, as a shell
// reports a process the signal killed (130 for SIGINT, 143 for SIGTERM), so a scheduler tells a stop it asked
// for from a failure; 130 for a cancellation that no recorded signal caused.
func interruptCode() int {
	if n := stopSignal.Load(); n > 0 {
		return 128 + int(n)
	}
	return exitInterrupt
}
