//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The Philox base of a step.
//
// Each kernel that draws dropout adds the constant tune_philox_base of its module (kernels/philox.cuh) to the
// offset it is given, and every op passes its offset less Backend.philoxBase, the value those constants hold
// in stream order: the counters drawn are the caller's offsets, bit for bit, whatever the base. The base moves
// only with SetPhiloxBase, between steps. A step of a training loop that sets its base first (the dropout
// offset of its first micro-batch) then launches the same kernel arguments every step, so its CUDA graph
// (graph.go) replays without updating a node: only the constants move, by copies issued before the replay.

// SetPhiloxBase makes base the Philox offset the dropout kernels count from (see above): it queues a copy of
// base into each loaded kernel module's constant (modules loaded later start from it) and changes nothing
// an op draws. It cannot be called inside a step a StepGraph captures or replays.
func (b *Backend) SetPhiloxBase(base uint64) (err error) {
	o := b.begin("SetPhiloxBase")
	defer o.end(&err)
	if b.graph != nil {
		o.fail(fmt.Errorf("cuda: SetPhiloxBase inside a step that a CUDA graph captures or replays (set it before StepGraph.Run)"))
		return
	}
	if base == b.philoxBase {
		return
	}
	for _, p := range b.philoxConsts {
		if o.fail(o.hostToDevice(uint64(p), unsafe.Pointer(&base), 8, "the Philox base")) != nil {
			return
		}
	}
	b.philoxBase = base
	return
}

// philoxArgs returns the seed and offset a dropout kernel is given for drop probability p: the offset less
// the base (the kernel adds it back), or both 0 when p is 0 and the kernel draws nothing — so that a step's
// ops without dropout pass the same arguments whatever their caller's offset and the base.
func (b *Backend) philoxArgs(p float32, seed, offset uint64) (uint64, uint64) {
	if p == 0 {
		return 0, 0
	}
	return seed, offset - b.philoxBase
}

// PhiloxBase returns the base set by SetPhiloxBase (0 until then).
func (b *Backend) PhiloxBase() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.philoxBase
}

// registerPhilox notes the tune_philox_base constant of module m, compiled from a source that includes
// kernels/philox.cuh (kernelImage.philox: modules without it are never asked, so that no driver call fails
// and compute-sanitizer reports no error), and sets it to the current base (stream-ordered, as
// SetPhiloxBase). b.mu is held.
func (b *Backend) registerPhilox(m cu.Module, file string) error {
	p, _, err := m.Global("tune_philox_base")
	if err != nil {
		return nil // the compiler dropped the constant: no kernel of the module reads it
	}
	b.philoxConsts = append(b.philoxConsts, p)
	if b.philoxBase == 0 {
		return nil // a module's constants start at 0
	}
	if b.graph != nil {
		return fmt.Errorf("cuda: kernels/%s loaded inside a step a CUDA graph captures (its Philox base cannot be set there)", file)
	}
	base := b.philoxBase
	if staged, err := b.stageUpload(uint64(p), unsafe.Pointer(&base), 8, "the Philox base of kernels/"+file); staged {
		return err
	}
	return driverErr("cuMemcpyHtoD", cu.MemcpyHtoD(p, unsafe.Pointer(&base), 8), "the Philox base of kernels/%s", file)
}
