package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
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
//
// A process started with SIGINT ignored (by a shell that runs it in the background, nohup) has it handled from
// here on, as signal.Notify does. The context's cause (context.Cause) is a stoppedBy when a signal canceled it.
func notifyStop(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			if n, ok := s.(syscall.Signal); ok {
				stopSignal.Store(int32(n))
			}
			cancel(stoppedBy{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// stoppedBy is the cause of a notifyStop context that a signal canceled.
type stoppedBy struct{ sig os.Signal }

func (s stoppedBy) Error() string { return "stopped by " + s.sig.String() }

// loadGuard ends the process when a stop signal arrives while a command loads (the model, the data: reads that
// do not watch a context, and may take minutes), after releasing what it holds: before, finetune went on
// loading and only the first step saw the signal, or, with no handler yet, the default action killed it and
// left its output_dir locked. Once the command calls started, the signal is the command's to handle (the
// step in flight ends).
type loadGuard struct {
	mu      sync.Mutex
	loading bool
	release []func()
	stderr  io.Writer
	exit    func(code int) // os.Exit; a test's stand-in
}

// guardLoading starts a loadGuard on ctx, a notifyStop context.
func guardLoading(ctx context.Context, stderr io.Writer) *loadGuard {
	g := &loadGuard{loading: true, stderr: stderr, exit: os.Exit}
	go func() {
		<-ctx.Done()
		var s stoppedBy
		if !errors.As(context.Cause(ctx), &s) {
			return // the command ended
		}
		g.mu.Lock() // held to the end: started waits, and the process ends
		defer g.mu.Unlock()
		if !g.loading {
			return
		}
		for i := len(g.release) - 1; i >= 0; i-- {
			g.release[i]()
		}
		fmt.Fprintf(g.stderr, "tune: stopped by %s while loading, before training started: nothing was trained or written\n", s.sig)
		g.exit(interruptCode())
	}()
	return g
}

// onStop adds f (a lock's Release) to what a stop while loading releases, the last added first.
func (g *loadGuard) onStop(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release = append(g.release, f)
}

// started ends the loading: a signal from here on only cancels the context.
func (g *loadGuard) started() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loading = false
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
