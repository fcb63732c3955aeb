package dist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// LaunchOptions says what Launch starts.
type LaunchOptions struct {
	NProc      int       // processes to start on this host (one per GPU), ≥ 1
	Program    string    // the executable (os.Executable() to start this program again)
	Args       []string  // its arguments
	Env        []string  // the base environment (os.Environ()); the torchrun variables are replaced
	MasterAddr string    // rank 0's rendezvous host; default 127.0.0.1
	MasterPort int       // its port; default a free port on MasterAddr
	Stdout     io.Writer // where every rank's standard output goes (shared, unprefixed, as torchrun's default)
	Stderr     io.Writer // where every rank's standard error goes
	// KillGrace is how long a rank has to exit after SIGTERM before it is killed; default 10 s.
	KillGrace time.Duration
}

// RankExitError says which rank ended a launched job, and how.
type RankExitError struct {
	Rank    int    // the rank that failed first
	Pid     int    // its process id
	State   string // "exit status 3", "signal: killed"
	Stopped []int  // the ranks Launch then stopped
}

// Error formats as "dist: rank 1 (pid 1234) failed: exit status 3; stopped ranks 0, 2".
func (e *RankExitError) Error() string {
	s := fmt.Sprintf("dist: rank %d (pid %d) failed: %s", e.Rank, e.Pid, e.State)
	if len(e.Stopped) > 0 {
		var rs []string
		for _, r := range e.Stopped {
			rs = append(rs, fmt.Sprint(r))
		}
		s += "; stopped rank(s) " + strings.Join(rs, ", ")
	}
	return s
}

// Launch runs NProc copies of Program as ranks 0..NProc-1 of one job on this host, like torchrun
// --nproc-per-node (torch/distributed/run.py): each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT. Each rank runs in its own process group and SIGINT/SIGTERM received by the
// launcher are forwarded to every rank (so a Ctrl-C reaches each once). When a rank fails (non-zero exit or a
// signal) the others get SIGTERM, then SIGKILL after KillGrace, and Launch returns a *RankExitError naming the
// rank that failed first. It returns nil when every rank exits 0. Cancelling ctx stops every rank the same way.
func Launch(ctx context.Context, o LaunchOptions) error {
	if o.NProc < 1 {
		return fmt.Errorf("dist: --nproc-per-node %d: need at least 1 process", o.NProc)
	}
	if o.MasterAddr == "" {
		o.MasterAddr = "127.0.0.1"
	}
	if o.MasterPort == 0 {
		p, err := freePort(o.MasterAddr)
		if err != nil {
			return fmt.Errorf("dist: no free port on %s for the rendezvous (set MASTER_PORT): %w", o.MasterAddr, err)
		}
		o.MasterPort = p
	}
	if o.KillGrace == 0 {
		o.KillGrace = 10 * time.Second
	}
	var base []string
	for _, kv := range o.Env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT":
			continue
		}
		base = append(base, kv)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, o.NProc)
	cmds := make([]*exec.Cmd, o.NProc)
	running := map[int]bool{}
	for r := range o.NProc {
		env := Env{Rank: r, WorldSize: o.NProc, LocalRank: r, LocalWorldSize: o.NProc, MasterAddr: o.MasterAddr, MasterPort: o.MasterPort}
		cmd := exec.Command(o.Program, o.Args...)
		cmd.Env = append(append([]string(nil), base...), env.Vars()...)
		cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
		cmd.SysProcAttr = ownGroup()
		if err := cmd.Start(); err != nil {
			for q := range running {
				_ = cmds[q].Process.Kill()
			}
			return fmt.Errorf("dist: starting rank %d: %w", r, err)
		}
		cmds[r], running[r] = cmd, true
		go func() { exits <- exit{r, cmd.Wait()} }()
	}

	var first *RankExitError
	var killTimer <-chan time.Time
	stopAll := func() {
		for r := range running {
			if first != nil {
				first.Stopped = append(first.Stopped, r)
			}
			_ = cmds[r].Process.Signal(syscall.SIGTERM)
		}
		if killTimer == nil {
			killTimer = time.After(o.KillGrace)
		}
	}
	done := ctx.Done()
	for len(running) > 0 {
		select {
		case e := <-exits:
			delete(running, e.rank)
			if e.err != nil && first == nil && killTimer == nil {
				first = &RankExitError{Rank: e.rank, Pid: cmds[e.rank].Process.Pid, State: exitState(e.err)}
				stopAll()
			}
		case s := <-sigs:
			for r := range running {
				_ = cmds[r].Process.Signal(s)
			}
		case <-done:
			done = nil
			stopAll()
		case <-killTimer:
			for r := range running {
				_ = cmds[r].Process.Kill()
			}
		}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dist: launch stopped: %w", err)
	}
	return nil
}

func exitState(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
