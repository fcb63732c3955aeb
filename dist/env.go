package dist

import (
	"fmt"
	"strconv"
	"strings"
)

// Env is one process's place in a data-parallel job, as torchrun describes it in environment variables
// (torch/distributed/run.py): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
type Env struct {
	Rank           int    // this process's rank, 0 ≤ Rank < WorldSize
	WorldSize      int    // number of processes
	LocalRank      int    // rank on this host: the GPU ordinal it uses
	LocalWorldSize int    // processes on this host
	MasterAddr     string // host of rank 0's rendezvous listener
	MasterPort     int    // its TCP port
}

// Single is the environment of a run that is not distributed: rank 0 of 1.
var Single = Env{WorldSize: 1, LocalWorldSize: 1}

// Distributed reports whether the job has more than one process.
func (e Env) Distributed() bool { return e.WorldSize > 1 }

// IsMain reports whether this is rank 0, the process that alone logs and writes outputs.
func (e Env) IsMain() bool { return e.Rank == 0 }

// Addr returns MASTER_ADDR:MASTER_PORT.
func (e Env) Addr() string { return joinHostPort(e.MasterAddr, e.MasterPort) }

// Vars returns the environment variables that describe e, as NAME=value, for a child process.
func (e Env) Vars() []string {
	return []string{
		"RANK=" + strconv.Itoa(e.Rank),
		"WORLD_SIZE=" + strconv.Itoa(e.WorldSize),
		"LOCAL_RANK=" + strconv.Itoa(e.LocalRank),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(e.LocalWorldSize),
		"MASTER_ADDR=" + e.MasterAddr,
		"MASTER_PORT=" + strconv.Itoa(e.MasterPort),
	}
}

// FromEnv reads the torchrun variables through getenv (os.Getenv). With none of RANK, WORLD_SIZE and
// LOCAL_RANK set it returns Single. Otherwise RANK and WORLD_SIZE are required, LOCAL_RANK defaults to RANK
// and LOCAL_WORLD_SIZE to WORLD_SIZE (one host), and with WORLD_SIZE > 1 MASTER_ADDR and MASTER_PORT are
// required. Every error names the variable, its value and what is expected.
func FromEnv(getenv func(string) string) (Env, error) {
	if getenv("RANK") == "" && getenv("WORLD_SIZE") == "" && getenv("LOCAL_RANK") == "" {
		return Single, nil
	}
	var e Env
	var err error
	num := func(name string, def int, min int) int {
		if err != nil {
			return 0
		}
		s := strings.TrimSpace(getenv(name))
		if s == "" {
			if def >= 0 {
				return def
			}
			err = fmt.Errorf("dist: %s is not set (torchrun-style launches set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT together; unset them all for a single-process run)", name)
			return 0
		}
		v, perr := strconv.Atoi(s)
		if perr != nil || v < min {
			err = fmt.Errorf("dist: %s=%q is not an integer ≥ %d", name, s, min)
			return 0
		}
		return v
	}
	e.WorldSize = num("WORLD_SIZE", -1, 1)
	e.Rank = num("RANK", -1, 0)
	e.LocalRank = num("LOCAL_RANK", e.Rank, 0)
	e.LocalWorldSize = num("LOCAL_WORLD_SIZE", e.WorldSize, 1)
	if err != nil {
		return Env{}, err
	}
	switch {
	case e.Rank >= e.WorldSize:
		return Env{}, fmt.Errorf("dist: RANK=%d is out of range for WORLD_SIZE=%d (0 ≤ RANK < WORLD_SIZE)", e.Rank, e.WorldSize)
	case e.LocalWorldSize > e.WorldSize:
		return Env{}, fmt.Errorf("dist: LOCAL_WORLD_SIZE=%d exceeds WORLD_SIZE=%d", e.LocalWorldSize, e.WorldSize)
	case e.LocalRank >= e.LocalWorldSize:
		return Env{}, fmt.Errorf("dist: LOCAL_RANK=%d is out of range for LOCAL_WORLD_SIZE=%d (0 ≤ LOCAL_RANK < LOCAL_WORLD_SIZE)", e.LocalRank, e.LocalWorldSize)
	}
	e.MasterAddr = strings.TrimSpace(getenv("MASTER_ADDR"))
	port := strings.TrimSpace(getenv("MASTER_PORT"))
	if e.WorldSize == 1 && e.MasterAddr == "" && port == "" {
		return e, nil
	}
	if e.MasterAddr == "" {
		return Env{}, fmt.Errorf("dist: MASTER_ADDR is not set (WORLD_SIZE=%d needs rank 0's host, e.g. MASTER_ADDR=127.0.0.1)", e.WorldSize)
	}
	if port == "" {
		return Env{}, fmt.Errorf("dist: MASTER_PORT is not set (WORLD_SIZE=%d needs a free TCP port on %s, e.g. MASTER_PORT=29500)", e.WorldSize, e.MasterAddr)
	}
	p, perr := strconv.Atoi(port)
	if perr != nil || p < 1 || p > 65535 {
		return Env{}, fmt.Errorf("dist: MASTER_PORT=%q is not a TCP port (1-65535)", port)
	}
	e.MasterPort = p
	return e, nil
}
