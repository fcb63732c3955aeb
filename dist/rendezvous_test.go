package dist

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func testPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func envFor(rank, world, port int) Env {
	return Env{Rank: rank, WorldSize: world, LocalRank: rank, LocalWorldSize: world, MasterAddr: "127.0.0.1", MasterPort: port}
}

// runRanks runs Rendezvous for the given ranks of a world concurrently and returns each rank's result.
func runRanks(t *testing.T, ranks []int, world int, payload []byte, timeout time.Duration) (map[int][]byte, map[int]error) {
	t.Helper()
	port := testPort(t)
	var mu sync.Mutex
	got, errs := map[int][]byte{}, map[int]error{}
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r > 0 {
				time.Sleep(time.Duration(r) * 20 * time.Millisecond) // some ranks start before rank 0 listens, some after
			}
			var p []byte
			if r == 0 {
				p = payload
			}
			b, err := Rendezvous(context.Background(), envFor(r, world, port), p, timeout)
			mu.Lock()
			got[r], errs[r] = b, err
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got, errs
}

func idBytes() []byte {
	id := make([]byte, 128)
	for i := range id {
		id[i] = byte(i*5 + 11)
	}
	return id
}

func TestRendezvousHandsRank0sBytesToEveryRank(t *testing.T) {
	id := idBytes()
	got, errs := runRanks(t, []int{3, 1, 0, 2}, 4, id, 10*time.Second)
	for r := range 4 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !bytes.Equal(got[r], id) {
			t.Errorf("rank %d got %x, want rank 0's id", r, got[r])
		}
	}
	if b, err := Rendezvous(context.Background(), Single, id, time.Second); err != nil || !bytes.Equal(b, id) {
		t.Errorf("single process: %v", err)
	}
}

func TestRendezvousNamesTheRankThatDidNotArrive(t *testing.T) {
	_, errs := runRanks(t, []int{0, 1}, 4, idBytes(), 700*time.Millisecond)
	if e := errs[0]; e == nil || !strings.Contains(e.Error(), "ranks 2, 3 of 4 did not arrive within 700ms") {
		t.Errorf("rank 0: %v", e)
	}
	if e := errs[1]; e == nil || !strings.Contains(e.Error(), "rank 1: rendezvous failed: rank 0:") || !strings.Contains(e.Error(), "ranks 2, 3") {
		t.Errorf("rank 1: %v", e)
	}
}

func TestRendezvousWithoutRank0(t *testing.T) {
	_, errs := runRanks(t, []int{2}, 3, nil, 500*time.Millisecond)
	if e := errs[2]; e == nil || !strings.Contains(e.Error(), "rank 2: rank 0 did not answer at MASTER_ADDR:MASTER_PORT 127.0.0.1:") {
		t.Errorf("rank 2: %v", e)
	}
}

func TestRendezvousRefusesMismatchedRanks(t *testing.T) {
	port := testPort(t)
	errc := make(chan error, 3)
	go func() {
		_, err := Rendezvous(context.Background(), envFor(0, 3, port), idBytes(), 5*time.Second)
		errc <- err
	}()
	// A stray connection that does not speak the protocol is ignored.
	go func() {
		for range 50 {
			if c, err := net.Dial("tcp", envFor(0, 3, port).Addr()); err == nil {
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	go func() {
		_, err := Rendezvous(context.Background(), envFor(1, 3, port), nil, 5*time.Second)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	go func() {
		_, err := Rendezvous(context.Background(), envFor(1, 3, port), nil, 5*time.Second) // RANK=1 twice
		errc <- err
	}()
	for range 3 {
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "rank 1 arrived twice") {
				t.Errorf("duplicate rank: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("rendezvous did not end")
		}
	}

	_, errs := func() (map[int][]byte, map[int]error) {
		port := testPort(t)
		var wg sync.WaitGroup
		errs := map[int]error{}
		var mu sync.Mutex
		for r, world := range []int{2, 3} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := Rendezvous(context.Background(), envFor(r, world, port), idBytes(), 5*time.Second)
				mu.Lock()
				errs[r] = err
				mu.Unlock()
			}()
		}
		wg.Wait()
		return nil, errs
	}()
	for r := range 2 {
		if e := errs[r]; e == nil || !strings.Contains(e.Error(), "rank 1 reports WORLD_SIZE=3, rank 0 has WORLD_SIZE=2") {
			t.Errorf("world mismatch, rank %d: %v", r, e)
		}
	}
}

func TestRendezvousCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Rendezvous(ctx, envFor(0, 2, testPort(t)), idBytes(), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("cancelled rank 0: %v", err)
	}
}

// TestRendezvousAcrossProcesses starts three processes (this test binary) with torchrun's variables; each
// reads its Env with FromEnv and prints the bytes it received.
func TestRendezvousAcrossProcesses(t *testing.T) {
	if os.Getenv("TUNE_DIST_CHILD") == "1" {
		env, err := FromEnv(os.Getenv)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		b, err := Rendezvous(context.Background(), env, idBytes(), 20*time.Second)
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Printf("ID %d %s\n", env.Rank, hex.EncodeToString(b))
		os.Exit(0)
	}
	port := testPort(t)
	const world = 3
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for r := range world {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRendezvousAcrossProcesses$")
		cmd.Env = append(os.Environ(), "TUNE_DIST_CHILD=1")
		cmd.Env = append(cmd.Env, envFor(r, world, port).Vars()...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, &out)
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
			continue
		}
		want := fmt.Sprintf("ID %d %s", r, hex.EncodeToString(idBytes()))
		if !strings.Contains(outs[r].String(), want) {
			t.Errorf("rank %d printed %q, want %q", r, outs[r], want)
		}
	}
}
