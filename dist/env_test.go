package dist

import (
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestFromEnv(t *testing.T) {
	e, err := FromEnv(envOf(nil))
	if err != nil || e != Single || e.Distributed() || !e.IsMain() {
		t.Fatalf("no variables: %+v, %v; want Single", e, err)
	}
	full := map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
	e, err = FromEnv(envOf(full))
	want := Env{Rank: 3, WorldSize: 4, LocalRank: 1, LocalWorldSize: 2, MasterAddr: "10.0.0.1", MasterPort: 29500}
	if err != nil || e != want {
		t.Fatalf("FromEnv = %+v, %v; want %+v", e, err, want)
	}
	if e.Addr() != "10.0.0.1:29500" || e.IsMain() || !e.Distributed() {
		t.Errorf("Addr %q IsMain %v Distributed %v", e.Addr(), e.IsMain(), e.Distributed())
	}
	// Vars round-trips.
	m := map[string]string{}
	for _, kv := range e.Vars() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	if back, err := FromEnv(envOf(m)); err != nil || back != e {
		t.Errorf("FromEnv(Vars()) = %+v, %v; want %+v", back, err, e)
	}
	// LOCAL_RANK and LOCAL_WORLD_SIZE default to one host.
	e, err = FromEnv(envOf(map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1234"}))
	if err != nil || e.LocalRank != 1 || e.LocalWorldSize != 2 {
		t.Errorf("defaults: %+v, %v", e, err)
	}
	// One process needs no master.
	if e, err = FromEnv(envOf(map[string]string{"RANK": "0", "WORLD_SIZE": "1"})); err != nil || e.WorldSize != 1 {
		t.Errorf("world 1: %+v, %v", e, err)
	}

	bad := []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{"RANK": ""}, "RANK is not set"},
		{map[string]string{"WORLD_SIZE": ""}, "WORLD_SIZE is not set"},
		{map[string]string{"RANK": "x"}, `RANK="x" is not an integer ≥ 0`},
		{map[string]string{"RANK": "-1"}, `RANK="-1" is not an integer ≥ 0`},
		{map[string]string{"WORLD_SIZE": "0"}, `WORLD_SIZE="0" is not an integer ≥ 1`},
		{map[string]string{"RANK": "4"}, "RANK=4 is out of range for WORLD_SIZE=4"},
		{map[string]string{"LOCAL_RANK": "2"}, "LOCAL_RANK=2 is out of range for LOCAL_WORLD_SIZE=2"},
		{map[string]string{"LOCAL_WORLD_SIZE": "8"}, "LOCAL_WORLD_SIZE=8 exceeds WORLD_SIZE=4"},
		{map[string]string{"MASTER_ADDR": ""}, "MASTER_ADDR is not set"},
		{map[string]string{"MASTER_PORT": ""}, "MASTER_PORT is not set"},
		{map[string]string{"MASTER_PORT": "70000"}, `MASTER_PORT="70000" is not a TCP port`},
		{map[string]string{"MASTER_PORT": "http"}, `MASTER_PORT="http" is not a TCP port`},
	}
	for _, c := range bad {
		m := map[string]string{}
		for k, v := range full {
			m[k] = v
		}
		for k, v := range c.change {
			m[k] = v
		}
		_, err := FromEnv(envOf(m))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.change, err, c.want)
		}
	}
}
