//go:build unix

package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer several ranks may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launchChild is the body of a launched rank (this test binary started again with TUNE_LAUNCH_CHILD set).
func launchChild(mode string) {
	env, err := FromEnv(os.Getenv)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	switch mode {
	case "ok": // rendezvous, then report what this rank received
		b, err := Rendezvous(context.Background(), env, []byte("id-from-rank-0"), 20*time.Second)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Printf("rank %d/%d local %d got %s\n", env.Rank, env.WorldSize, env.LocalRank, b)
		os.Exit(0)
	case "die": // rank 1 fails; the others would run for a minute
		if env.Rank == 1 {
			time.Sleep(200 * time.Millisecond)
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	case "stubborn": // rank 0 fails; rank 1 ignores SIGTERM and must be killed
		signal.Ignore(syscall.SIGTERM)
		if env.Rank == 0 {
			time.Sleep(300 * time.Millisecond)
			os.Exit(4)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	case "interrupt": // every rank waits for the forwarded SIGINT, then exits cleanly
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT)
		fmt.Printf("rank %d ready\n", env.Rank)
		select {
		case <-c:
			fmt.Printf("rank %d interrupted\n", env.Rank)
			os.Exit(0)
		case <-time.After(30 * time.Second):
			os.Exit(5)
		}
	}
	os.Exit(9)
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("TUNE_LAUNCH_CHILD"); mode != "" {
		launchChild(mode)
	}
	os.Exit(m.Run())
}

func launchOpts(mode string, n int, out *syncBuffer) LaunchOptions {
	return LaunchOptions{NProc: n, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env: append(os.Environ(), "TUNE_LAUNCH_CHILD="+mode, "RANK=7"), Stdout: out, Stderr: out, KillGrace: time.Second}
}

func TestLaunchStartsEveryRank(t *testing.T) {
	var out syncBuffer
	if err := Launch(context.Background(), launchOpts("ok", 3, &out)); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for r := range 3 {
		if want := fmt.Sprintf("rank %d/3 local %d got id-from-rank-0", r, r); !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in\n%s", want, out.String())
		}
	}
}

func TestLaunchEndsAllWhenOneDies(t *testing.T) {
	var out syncBuffer
	start := time.Now()
	err := Launch(context.Background(), launchOpts("die", 3, &out))
	var re *RankExitError
	if !errors.As(err, &re) || re.Rank != 1 || re.State != "exit status 3" || len(re.Stopped) != 2 {
		t.Fatalf("Launch = %v, want rank 1's exit status 3 with ranks 0 and 2 stopped", err)
	}
	if !strings.Contains(err.Error(), "dist: rank 1 (pid ") {
		t.Errorf("message %q does not name the rank", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s: the other ranks were not stopped", d)
	}
}

func TestLaunchKillsRanksThatIgnoreSIGTERM(t *testing.T) {
	var out syncBuffer
	start := time.Now()
	err := Launch(context.Background(), launchOpts("stubborn", 2, &out))
	var re *RankExitError
	if !errors.As(err, &re) || re.Rank != 0 || re.State != "exit status 4" {
		t.Fatalf("Launch = %v, want rank 0's exit status 4", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %s: rank 1 was not killed after the grace period", d)
	}
}

func TestLaunchForwardsSIGINT(t *testing.T) {
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- Launch(context.Background(), launchOpts("interrupt", 2, &out)) }()
	deadline := time.Now().Add(20 * time.Second)
	for !(strings.Contains(out.String(), "rank 0 ready") && strings.Contains(out.String(), "rank 1 ready")) {
		if time.Now().After(deadline) {
			t.Fatalf("ranks did not start:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil { // caught by Launch's signal.Notify
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Launch = %v\n%s", err, out.String())
	}
	for r := range 2 {
		if !strings.Contains(out.String(), fmt.Sprintf("rank %d interrupted", r)) {
			t.Errorf("rank %d did not get SIGINT:\n%s", r, out.String())
		}
	}
}

func TestLaunchCancelled(t *testing.T) {
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := Launch(ctx, launchOpts("interrupt", 2, &out))
	if err == nil || !strings.Contains(err.Error(), "launch stopped") {
		t.Errorf("Launch = %v", err)
	}
}
