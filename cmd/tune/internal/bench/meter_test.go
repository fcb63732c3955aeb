package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/tensor/cpu"
)

func TestMeterMemory(t *testing.T) {
	m := NewMeter(cpu.New())
	a, err := m.Alloc(tensor.F32, 10, 4) // 160 bytes
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Alloc(tensor.BF16, 8) // 16 bytes
	if err != nil {
		t.Fatal(err)
	}
	view, err := a.View(4, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name       string
		do         func()
		bytes, pk  int64
		afterReset int64
	}{
		{"two allocations count their bytes", func() {}, 176, 176, 176},
		{"freeing a view frees nothing", func() { m.Free(view) }, 176, 176, 176},
		{"freeing the owner drops its bytes, the peak stays", func() { m.Free(a) }, 16, 176, 16},
		{"a second free of the same tensor counts nothing", func() { m.Free(a) }, 16, 176, 16},
		{"freeAll releases the rest", func() { m.freeAll() }, 0, 176, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			if m.Bytes() != s.bytes || m.Peak() != s.pk {
				t.Errorf("bytes %d peak %d, want %d and %d", m.Bytes(), m.Peak(), s.bytes, s.pk)
			}
		})
	}
	m.ResetPeak()
	if m.Peak() != 0 {
		t.Errorf("after ResetPeak the peak is %d, want the current 0", m.Peak())
	}
	if err := m.Fill(b, 1); err == nil {
		t.Error("Fill on a freed tensor succeeded; freeAll did not reach the backend")
	}
}

func TestMeterProfiling(t *testing.T) {
	m := NewMeter(cpu.New())
	a, _ := m.Alloc(tensor.F32, 4, 3)
	bm, _ := m.Alloc(tensor.F32, 3, 5)
	c, _ := m.Alloc(tensor.F32, 4, 5)
	gemm := tensor.GemmArgs{M: 4, N: 5, K: 3, A: a, B: bm, C: c, Alpha: 1, Beta: 1, Batch: 1}
	if err := m.Gemm(gemm); err != nil { // not profiled
		t.Fatal(err)
	}
	if len(m.Ops()) != 0 {
		t.Fatalf("ops %v recorded with profiling off", m.Ops())
	}
	m.SetProfiling(true)
	for range 2 {
		if err := m.Gemm(gemm); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Scale(c, 2); err != nil {
		t.Fatal(err)
	}
	norm, err := m.GlobalNorm([]*tensor.Tensor{c})
	if err != nil || math.IsNaN(norm) {
		t.Fatalf("GlobalNorm through the meter: %v, %v", norm, err)
	}
	m.SetProfiling(false)
	got := map[string]OpStat{}
	for _, o := range m.Ops() {
		got[o.Op] = o
	}
	for _, tc := range []struct {
		name, op     string
		calls        int
		flops, bytes float64
	}{
		{"a GEMM with beta 1 reads and writes C", "Gemm input-grad (f32)", 2, 2 * 2 * 4 * 5 * 3, 2 * 4 * (12 + 15 + 2*20)},
		{"Scale reads and writes x", "Scale", 1, 0, 2 * 80},
		{"GlobalNorm reads its tensors", "GlobalNorm", 1, 0, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := got[tc.op]
			if !ok {
				t.Fatalf("no %q in %v", tc.op, m.Ops())
			}
			if o.Calls != tc.calls || o.FLOPs != tc.flops || o.Bytes != tc.bytes || o.MS < 0 {
				t.Errorf("%+v, want %d calls, %v FLOPs, %v bytes", o, tc.calls, tc.flops, tc.bytes)
			}
		})
	}
	if gs := m.Gemms(); len(gs) != 1 || gs[0].Op != "f32 4×5×3 NN →f32" || gs[0].Calls != 2 {
		t.Errorf("GEMM shapes %+v, want one \"f32 4×5×3 NN →f32\" with 2 calls", gs)
	}
	m.SetProfiling(true)
	if len(m.Ops()) != 0 {
		t.Errorf("SetProfiling(true) kept %d old op classes", len(m.Ops()))
	}
}

func TestGemmRoles(t *testing.T) {
	for _, tc := range []struct {
		name string
		args tensor.GemmArgs
		want string
	}{
		{"x·Wᵀ is a forward projection", tensor.GemmArgs{TransB: true}, "Gemm forward (bf16)"},
		{"dYᵀ·X is a weight gradient", tensor.GemmArgs{TransA: true}, "Gemm weight-grad (bf16)"},
		{"dY·W is an input gradient", tensor.GemmArgs{}, "Gemm input-grad (bf16)"},
		{"a batched product is attention, transposed or not", tensor.GemmArgs{TransA: true, Batch: 8}, "Gemm attention (bf16)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMeter(cpu.New())
			batch := max(tc.args.Batch, 1)
			a, _ := m.Alloc(tensor.BF16, batch, 2, 2)
			b, _ := m.Alloc(tensor.BF16, batch, 2, 2)
			c, _ := m.Alloc(tensor.F32, batch, 2, 2)
			g := tc.args
			g.M, g.N, g.K, g.A, g.B, g.C, g.Alpha, g.Batch = 2, 2, 2, a, b, c, 1, batch
			g.StrideA, g.StrideB, g.StrideC = 4, 4, 4
			m.SetProfiling(true)
			if err := m.Gemm(g); err != nil {
				t.Fatal(err)
			}
			if ops := m.Ops(); len(ops) != 1 || ops[0].Op != tc.want {
				t.Errorf("ops %+v, want one %q", ops, tc.want)
			}
		})
	}
}

// TestMeterLimit: an Alloc beyond the Meter's Limit fails before the inner backend allocates, with a message
// that says what to do; below it allocations go through and are counted.
func TestMeterLimit(t *testing.T) {
	m := NewMeter(cpu.New())
	m.Limit = 1 << 20
	a, err := m.Alloc(tensor.F32, 1<<17) // 512 KiB
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free(a)
	if _, err := m.Alloc(tensor.F32, 1<<17+1); err == nil || !strings.Contains(err.Error(), "smaller --model") {
		t.Fatalf("got %v, want a refusal past the limit", err)
	}
	if m.Bytes() != 1<<19 {
		t.Errorf("counted %d bytes, want %d", m.Bytes(), 1<<19)
	}
	if NewMeter(cpu.New()).Limit <= 0 && hostAvailable() > 0 {
		t.Errorf("a CPU Meter has no limit although /proc/meminfo says %d bytes are available", hostAvailable())
	}
}

// TestMeterEmbeddingBytes checks that the embedding ops count the table rows their ids touch once each (the
// ids' distinct values when uploaded through the Meter, else min(ids, table rows)), not one row per id: 6
// ids over 3 distinct rows of a (10, 4) F32 table.
func TestMeterEmbeddingBytes(t *testing.T) {
	m := NewMeter(cpu.New())
	m.SetProfiling(true)
	ids, _ := m.Alloc(tensor.I32, 6)
	if err := m.Upload(ids, []int32{1, 7, 1, 1, 7, 3}); err != nil {
		t.Fatal(err)
	}
	table, _ := m.Alloc(tensor.F32, 10, 4)
	out, _ := m.Alloc(tensor.F32, 6, 4)
	if err := m.Embedding(out, ids, table); err != nil {
		t.Fatal(err)
	}
	if err := m.EmbeddingBackward(table, ids, out); err != nil {
		t.Fatal(err)
	}
	small, _ := m.Alloc(tensor.F32, 2, 4) // ids not seen uploaded: at most 2 rows
	other, _ := m.Alloc(tensor.I32, 6)
	if err := m.EmbeddingBackward(small, other, out); err != nil {
		t.Fatal(err)
	}
	got := map[string]OpStat{}
	for _, o := range m.Ops() {
		got[o.Op] = o
	}
	if b := got["Embedding"].Bytes; b != 6*4+6*16+3*16 {
		t.Errorf("Embedding counts %v bytes, want ids + out + 3 rows = %v", b, 6*4+6*16+3*16)
	}
	if b := got["EmbeddingBackward"].Bytes; b != (6*4+6*16+2*3*16)+(6*4+6*16+2*2*16) {
		t.Errorf("EmbeddingBackward counts %v bytes, want (ids + dout + 3 rows twice) + (ids + dout + 2 rows twice)", b)
	}
}

// gatedCPU is the CPU backend with a TimeGated that reports fixed device and host times, so that the Meter's
// use of a gated timer can be checked without a GPU.
type gatedCPU struct {
	tensor.Backend
	calls int
}

func (g *gatedCPU) TimeGated(fn func() error) (float64, float64, bool, error) {
	g.calls++
	err := fn()
	return 0.25, 0.5, g.calls == 2, err
}

// TestMeterGatedTiming: with a backend that times ops behind a gate, the Meter sums its device and host times
// apart and counts the calls that waited for the device.
func TestMeterGatedTiming(t *testing.T) {
	g := &gatedCPU{Backend: cpu.New()}
	m := NewMeter(g)
	x, _ := m.Alloc(tensor.F32, 8)
	m.SetProfiling(true)
	for range 3 {
		if err := m.Scale(x, 2); err != nil {
			t.Fatal(err)
		}
	}
	m.SetProfiling(false)
	ops := m.Ops()
	if len(ops) != 1 || ops[0].Op != "Scale" {
		t.Fatalf("ops %+v, want one Scale class", ops)
	}
	if o := ops[0]; o.Calls != 3 || o.MS != 0.75 || o.HostMS != 1.5 || o.Waits != 1 {
		t.Errorf("%+v, want 3 calls, 0.75 device ms, 1.5 host ms, 1 wait", o)
	}
	if _, how := gatedOn(g); !strings.Contains(how, "gate") {
		t.Errorf("gatedOn says %q, want the gated timing named", how)
	}
	if _, how := gatedOn(cpu.New()); how != "wall clock" {
		t.Errorf("gatedOn(cpu) says %q, want wall clock", how)
	}
}
