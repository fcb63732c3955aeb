//go:build cuda

package cuda

/*
#include <cuda.h>

// tc_set_smem raises a kernel's dynamic shared memory limit to smem bytes.
static int tc_set_smem(void *fn, unsigned smem) {
	return (int)cuFuncSetAttribute((CUfunction)fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// sharedOptIn returns the most dynamic shared memory a block may opt into on this device
// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 227 KiB on the H100/H200, 163 KiB on the A100),
// read once; 48 KiB if the driver does not say.
func (b *Backend) sharedOptIn() int {
	if b.smemOptIn == 0 {
		b.smemOptIn = 48 * 1024
		if v, err := b.dev.Attribute(cu.DeviceAttribute(C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)); err == nil && v > b.smemOptIn {
			b.smemOptIn = v
		}
	}
	return b.smemOptIn
}

// launchShared is launch with smem bytes of dynamic shared memory, raising the kernel's limit first when it
// needs more than the default 48 KiB (once per kernel and size).
func (o *op) launchShared(file, name string, gx, gy, bx, by, smem int, args ...uint64) {
	if o.err != nil {
		return
	}
	f, err := o.b.function(file, name)
	if o.fail(err) != nil {
		return
	}
	fn := *(*unsafe.Pointer)(unsafe.Pointer(&f))
	if smem > 48*1024 && o.b.smemSet[uintptr(fn)] < smem {
		if rc := C.tc_set_smem(fn, C.uint(smem)); rc != 0 {
			o.fail(driverErrCode("cuFuncSetAttribute", int(rc), fmt.Sprintf("%s: %d bytes of dynamic shared memory", name, smem)))
			return
		}
		if o.b.smemSet == nil {
			o.b.smemSet = map[uintptr]int{}
		}
		o.b.smemSet[uintptr(fn)] = smem
	}
	run := func() error {
		params := make([]unsafe.Pointer, len(args))
		for i := range args {
			params[i] = unsafe.Pointer(&args[i])
		}
		return driverErr("cuLaunchKernel", f.Launch(gx, gy, 1, bx, by, 1, smem, o.b.stream, params), "%s (grid %d×%d, block %d×%d, %d bytes of shared memory)", name, gx, gy, bx, by, smem)
	}
	if o.b.graph == nil {
		o.fail(run())
		return
	}
	k := &kernelLaunch{name: name, fn: fn, gx: gx, gy: gy, gz: 1, bx: bx, by: by, smem: smem, args: args}
	o.fail(o.issue(func() []byte { return kernelKey(fn, gx, gy, 1, bx, by, smem) }, k, nil, run))
}
