package dist

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The rendezvous protocol (one TCP connection per rank > 0, to rank 0):
//
//	rank → rank 0: "TUNERDV1", rank (uint32 big-endian), world size (uint32)
//	rank 0 → rank: status (1 byte: 0 ok, 1 failed), length (uint32), payload or error message
//
// Rank 0 answers once every rank has arrived, so a returned Rendezvous is also a barrier. Connections that do
// not start with the magic (a port scanner, a stale client of another protocol) are closed and ignored.
const (
	magic      = "TUNERDV1"
	maxPayload = 1 << 20
	// helloTimeout bounds the wait for a new connection's hello, so a stray connection cannot hold up the
	// ranks behind it.
	helloTimeout = 10 * time.Second
	// grace is how long past the timeout a rank waits for rank 0's answer (which, when rank 0 gives up at
	// the same deadline, names the missing ranks), and how long rank 0 takes to send it.
	grace = 3 * time.Second
)

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Rendezvous hands payload from rank 0 to every rank and returns it (on rank 0 its own payload; other ranks'
// payload arguments are ignored). Rank 0 listens on env.Addr(); the others connect, retrying until it
// listens. It fails after timeout: on rank 0 naming the ranks that did not arrive, on the others saying that
// rank 0 did not answer. A rank that reports another world size, or a rank that arrives twice, fails the
// rendezvous on every rank that arrived. With one process it returns payload at once.
func Rendezvous(ctx context.Context, env Env, payload []byte, timeout time.Duration) ([]byte, error) {
	if env.WorldSize <= 1 {
		return payload, nil
	}
	deadline := time.Now().Add(timeout)
	if env.Rank == 0 {
		if len(payload) > maxPayload {
			return nil, fmt.Errorf("dist: rendezvous payload of %d bytes exceeds %d", len(payload), maxPayload)
		}
		return payload, serve(ctx, env, payload, timeout, deadline)
	}
	return join(ctx, env, timeout, deadline)
}

func joinHostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// serve is rank 0's side.
func serve(ctx context.Context, env Env, payload []byte, timeout time.Duration, deadline time.Time) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", env.Addr())
	if err != nil {
		return fmt.Errorf("dist: rank 0 cannot listen on MASTER_ADDR:MASTER_PORT %s: %w (choose a free port with MASTER_PORT)", env.Addr(), err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	_ = ln.(*net.TCPListener).SetDeadline(deadline)

	conns := map[int]net.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	fail := func(err error) error {
		for _, c := range conns {
			_ = reply(c, 1, []byte("rank 0: "+err.Error()), time.Now().Add(grace))
		}
		return err
	}
	for len(conns) < env.WorldSize-1 {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return fail(fmt.Errorf("dist: rendezvous on %s: %w", env.Addr(), ctx.Err()))
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fail(fmt.Errorf("dist: rendezvous on %s: %s of %d did not arrive within %s (did they start, with MASTER_ADDR=%s MASTER_PORT=%d?)",
					env.Addr(), missing(conns, env.WorldSize), env.WorldSize, timeout, env.MasterAddr, env.MasterPort))
			}
			return fail(fmt.Errorf("dist: rendezvous on %s: %w", env.Addr(), err))
		}
		rank, world, err := readHello(c, minTime(deadline, time.Now().Add(helloTimeout)))
		if err != nil {
			c.Close() // not one of ours
			continue
		}
		switch {
		case world != env.WorldSize:
			conns[-1-len(conns)] = c // answered by fail
			return fail(fmt.Errorf("dist: rank %d reports WORLD_SIZE=%d, rank 0 has WORLD_SIZE=%d (every rank must be started with the same WORLD_SIZE)", rank, world, env.WorldSize))
		case rank <= 0 || rank >= env.WorldSize:
			conns[-1-len(conns)] = c
			return fail(fmt.Errorf("dist: a process reports RANK=%d, out of range 1..%d", rank, env.WorldSize-1))
		case conns[rank] != nil:
			conns[-1-len(conns)] = c
			return fail(fmt.Errorf("dist: rank %d arrived twice (two processes were started with RANK=%d)", rank, rank))
		}
		conns[rank] = c
	}
	for r, c := range conns {
		if err := reply(c, 0, payload, deadline); err != nil {
			return fmt.Errorf("dist: rendezvous: sending to rank %d: %w", r, err)
		}
	}
	return nil
}

// missing names the ranks in 1..world-1 that have no connection: "rank 3" or "ranks 2, 3".
func missing(conns map[int]net.Conn, world int) string {
	var m []string
	for r := 1; r < world; r++ {
		if conns[r] == nil {
			m = append(m, strconv.Itoa(r))
		}
	}
	sort.Strings(m)
	if len(m) == 1 {
		return "rank " + m[0]
	}
	return "ranks " + strings.Join(m, ", ")
}

func readHello(c net.Conn, deadline time.Time) (rank, world int, err error) {
	_ = c.SetReadDeadline(deadline)
	var buf [len(magic) + 8]byte
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return 0, 0, err
	}
	if string(buf[:len(magic)]) != magic {
		return 0, 0, errors.New("bad magic")
	}
	return int(binary.BigEndian.Uint32(buf[len(magic):])), int(binary.BigEndian.Uint32(buf[len(magic)+4:])), nil
}

func reply(c net.Conn, status byte, body []byte, deadline time.Time) error {
	_ = c.SetWriteDeadline(deadline)
	w := bufio.NewWriter(c)
	w.WriteByte(status)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(body)))
	w.Write(n[:])
	w.Write(body)
	return w.Flush()
}

// join is the side of ranks > 0.
func join(ctx context.Context, env Env, timeout time.Duration, deadline time.Time) ([]byte, error) {
	var last error
	var c net.Conn
	for c == nil {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", env.Rank, env.Addr(), err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("dist: rank %d: rank 0 did not answer at MASTER_ADDR:MASTER_PORT %s within %s (is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?): %v",
				env.Rank, env.Addr(), timeout, last)
		}
		d := net.Dialer{Deadline: deadline}
		var err error
		if c, err = d.DialContext(ctx, "tcp", env.Addr()); err != nil {
			last = err
			c = nil
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var hello [len(magic) + 8]byte
	copy(hello[:], magic)
	binary.BigEndian.PutUint32(hello[len(magic):], uint32(env.Rank))
	binary.BigEndian.PutUint32(hello[len(magic)+4:], uint32(env.WorldSize))
	_ = c.SetDeadline(deadline.Add(grace))
	if _, err := c.Write(hello[:]); err != nil {
		return nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", env.Rank, env.Addr(), err)
	}
	var head [5]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("dist: rank %d: rank 0 at %s did not complete the rendezvous within %s (other ranks did not arrive?)", env.Rank, env.Addr(), timeout)
		}
		return nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", env.Rank, env.Addr(), err)
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxPayload {
		return nil, fmt.Errorf("dist: rank %d: rank 0 at %s sent %d bytes (more than %d): not a tune rendezvous", env.Rank, env.Addr(), n, maxPayload)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, fmt.Errorf("dist: rank %d: rendezvous with rank 0 at %s: %w", env.Rank, env.Addr(), err)
	}
	if head[0] != 0 {
		return nil, fmt.Errorf("dist: rank %d: rendezvous failed: %s", env.Rank, body)
	}
	return body, nil
}
