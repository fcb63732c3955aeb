package transformer

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tune-ml/tune/tensor"
)

// arenaAlign is the granularity of arena views in elements: 128 elements keeps every view 256-byte aligned for
// 16-bit types and 512-byte aligned for 32-bit ones, which is what cuBLASLt and vectorised kernels like.
const arenaAlign = 128

// Arena hands out the activation buffers of one training step as views of one flat allocation per dtype (a
// step arena, as llm.c carves its activations from one allocation). A model describes its buffers once per batch shape with a layout function
// that calls Take for each of them; Carve runs that function twice, first to measure and then to hand out views,
// and allocates only when the measured size exceeds what the arena already holds. So a steady-state step,
// whose batch shape fits the largest one seen, allocates nothing, and a CUDA graph would see stable addresses.
//
// The views stay valid until the next Carve. The zero Arena is not usable; NewArena returns one.
type Arena struct {
	b         tensor.Backend
	slabs     map[tensor.DType]*tensor.Tensor // flat 1-D buffers, one per dtype
	used      map[tensor.DType]int            // elements handed out in the current pass
	measuring bool
	shared    bool           // inside an Overlay after its first layout: Take's views overlap earlier ones
	record    *[]ArenaBuffer // Measure's list of the buffers taken; nil otherwise
	scratch   map[scratchKey]*scratchSlot
}

// scratchKey names a Scratch region: the caller's name and the dtype.
type scratchKey struct {
	name string
	dt   tensor.DType
}

// scratchSlot is a Scratch region: the largest request (elements, aligned, and its shape) and, once the
// measuring pass is done, its offset in the dtype's slab.
type scratchSlot struct {
	n, off int
	shape  tensor.Shape
}

// ArenaBuffer is one buffer of a step arena's layout: its dtype and shape.
type ArenaBuffer struct {
	DType tensor.DType // element type
	Shape tensor.Shape // the shape Take was asked for
	// Shared marks a buffer laid over earlier ones (the second and later layouts of an Overlay): it adds no
	// bytes to the arena.
	Shared bool
}

// Bytes returns the buffer's size in bytes.
func (b ArenaBuffer) Bytes() int64 { return int64(b.Shape.Numel()) * int64(b.DType.Size()) }

// NewArena returns an empty arena on backend b; its first Carve allocates.
func NewArena(b tensor.Backend) *Arena {
	return &Arena{b: b, slabs: map[tensor.DType]*tensor.Tensor{}, used: map[tensor.DType]int{}}
}

// Take returns a view of dtype dt and the given shape. During the measuring pass the view has no buffer and
// must not be used; layout functions only store it. Take never fails: sizes are checked by Carve.
func (a *Arena) Take(dt tensor.DType, shape ...int) *tensor.Tensor {
	s := tensor.Shape(append([]int(nil), shape...))
	off := a.used[dt]
	a.used[dt] = off + (s.Numel()+arenaAlign-1)/arenaAlign*arenaAlign
	t := &tensor.Tensor{Shape: s, DType: dt}
	if a.record != nil {
		*a.record = append(*a.record, ArenaBuffer{DType: dt, Shape: s, Shared: a.shared})
	}
	if !a.measuring {
		slab := a.slabs[dt]
		t.Buf, t.Offset = slab.Buf, slab.Offset+off
	}
	return t
}

// Scratch returns a view of dtype dt and the given shape at the start of the region called name: one buffer
// that every Scratch call of that name and dtype shares, sized for the largest of them and laid out after
// every Take (so outside any Overlay). It is for a module's transient buffer, used only within one of its
// calls (a LoRA adapter's input gradient through its dropout): callers sharing a name must not hold it across
// each other's calls. Like Take it never fails; the carving pass must ask for no more than the measuring one.
func (a *Arena) Scratch(name string, dt tensor.DType, shape ...int) *tensor.Tensor {
	s := tensor.Shape(append([]int(nil), shape...))
	n := (s.Numel() + arenaAlign - 1) / arenaAlign * arenaAlign
	k := scratchKey{name, dt}
	t := &tensor.Tensor{Shape: s, DType: dt}
	if a.scratch == nil {
		a.scratch = map[scratchKey]*scratchSlot{}
	}
	slot := a.scratch[k]
	if a.measuring {
		if slot == nil {
			slot = &scratchSlot{}
			a.scratch[k] = slot
		}
		if n > slot.n {
			slot.n, slot.shape = n, s
		}
		if a.record != nil {
			*a.record = append(*a.record, ArenaBuffer{DType: dt, Shape: s, Shared: true})
		}
		return t
	}
	if slot == nil || n > slot.n {
		panic(fmt.Sprintf("transformer: step arena: scratch %q %v%v was not measured: the layout is not deterministic", name, dt, s))
	}
	slab := a.slabs[dt]
	t.Buf, t.Offset = slab.Buf, slab.Offset+slot.off
	return t
}

// placeScratch lays the measured Scratch regions out after the Takes (in name order, so the layout is the
// same every time) and records them in Measure's list.
func (a *Arena) placeScratch() {
	keys := slices.Collect(maps.Keys(a.scratch))
	slices.SortFunc(keys, func(x, y scratchKey) int {
		if x.name != y.name {
			if x.name < y.name {
				return -1
			}
			return 1
		}
		return int(x.dt) - int(y.dt)
	})
	for _, k := range keys {
		slot := a.scratch[k]
		slot.off = a.used[k.dt]
		a.used[k.dt] += slot.n
		if a.record != nil {
			*a.record = append(*a.record, ArenaBuffer{DType: k.dt, Shape: slot.shape})
		}
	}
}

// Overlay runs layout(0) … layout(n−1) from the same arena offsets, so the buffers each call takes overlap
// those of the others (one region the size of the largest call), then lets later Takes continue past that
// region. Gradient checkpointing lays out the transformer layers' internal activations this way: only one
// layer's are alive at a time, the forward's and then the backward's recomputation (LayoutLayers).
func (a *Arena) Overlay(n int, layout func(i int)) {
	start, end := maps.Clone(a.used), maps.Clone(a.used)
	outer := a.shared
	for i := range n {
		a.used, a.shared = maps.Clone(start), outer || i > 0
		layout(i)
		for dt, u := range a.used {
			end[dt] = max(end[dt], u)
		}
	}
	a.used, a.shared = end, outer
}

// CarveFor re-carves a for the batch shape key unless *have already equals it, then records key in *have: a
// model keeps the key its views were carved for (batch, sequence, dtype, ...) and calls this at every Forward.
// *have is zeroed while carving, so a failed layout leaves no stale key and the next call carves again.
func CarveFor[K comparable](a *Arena, have *K, key K, layout func(a *Arena, key K) error) error {
	if key == *have {
		return nil
	}
	var zero K
	*have = zero
	if err := a.Carve(func(a *Arena) error { return layout(a, key) }); err != nil {
		return err
	}
	*have = key
	return nil
}

// Carve runs layout to measure the buffers it takes, grows the arena's allocations where they are too small
// (freeing the old ones), then runs layout again to hand out the views. Views from an earlier Carve are
// invalid afterwards. Errors: an Alloc failure (out of memory), or an error returned by layout.
func (a *Arena) Carve(layout func(a *Arena) error) error {
	clear(a.used)
	a.scratch = map[scratchKey]*scratchSlot{}
	a.measuring = true
	err := layout(a)
	a.measuring = false
	if err != nil {
		return err
	}
	a.placeScratch()
	for dt, need := range a.used {
		if slab := a.slabs[dt]; slab != nil && slab.Numel() >= need {
			continue
		}
		if old := a.slabs[dt]; old != nil {
			a.b.Free(old)
			delete(a.slabs, dt)
		}
		t, err := a.b.Alloc(dt, need)
		if err != nil {
			return fmt.Errorf("transformer: step arena: allocating %d %v elements: %w", need, dt, err)
		}
		a.slabs[dt] = t
	}
	clear(a.used)
	return layout(a)
}

// Measure runs layout as Carve's measuring pass only: it allocates nothing and returns every buffer layout
// takes, in order, and the bytes a Carve of that layout needs (views rounded up to the arena's alignment).
// The views layout stores have no buffer: carve again before using them.
func (a *Arena) Measure(layout func(a *Arena) error) ([]ArenaBuffer, int64, error) {
	var bufs []ArenaBuffer
	clear(a.used)
	a.scratch = map[scratchKey]*scratchSlot{}
	a.measuring, a.record = true, &bufs
	err := layout(a)
	if err == nil {
		a.placeScratch()
	}
	a.measuring, a.record = false, nil
	var n int64
	for dt, used := range a.used {
		n += int64(used) * int64(dt.Size())
	}
	clear(a.used)
	return bufs, n, err
}

// Bytes returns the arena's allocated size in bytes over all dtypes.
func (a *Arena) Bytes() int {
	n := 0
	for _, t := range a.slabs {
		n += t.Bytes()
	}
	return n
}

// Free releases every allocation; the arena can be carved again afterwards.
func (a *Arena) Free() {
	for dt, t := range a.slabs {
		a.b.Free(t)
		delete(a.slabs, dt)
	}
}
