package loaders

import (
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/nlpodyssey/safetensors"
)

// TensorInfo describes one tensor of a checkpoint without reading its data.
type TensorInfo struct {
	Name  string // the key in the safetensors header
	DType string // safetensors spelling ("F32", "BF16", "F8_E4M3", ...), including dtypes tune cannot read
	Shape []int  // as stored, outermost first (C order); empty for a 0-dim tensor
	Bytes int64  // size of the tensor's data in the file
	File  string // path of the file that holds it
}

// NumElements returns the product of Shape (1 for a 0-dim tensor).
func (ti TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range ti.Shape {
		n *= int64(d)
	}
	return n
}

// safetensorsFile is one open safetensors file: its bytes (memory-mapped, or read where mapping is not possible),
// the validated header, and nlpodyssey/safetensors' view of the same bytes.
type safetensorsFile struct {
	path    string
	buf     []byte
	release func() error
	hdr     *stHeader
	// st hands out the tensor views. It is nil when the file holds a dtype the library cannot represent (F8_*,
	// C64, F4, F6_*); views then come from tune's own validated offsets.
	st *safetensors.SafeTensors
}

// openSafetensorsFile maps path and validates it completely (header, offsets, coverage). Nothing of the data is
// read or copied: the tensors stay in the mapping until close.
func openSafetensorsFile(path string) (*safetensorsFile, error) {
	buf, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	f := &safetensorsFile{path: path, buf: buf, release: release}
	if f.hdr, err = parseSafetensorsHeader(path, buf); err != nil {
		f.close()
		return nil, err
	}
	if f.hdr.libOK {
		st, err := deserialize(buf)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("loaders: %s: %w", path, err)
		}
		if err := f.crossCheck(&st); err != nil {
			f.close()
			return nil, err
		}
		f.st = &st
	}
	return f, nil
}

// deserialize calls safetensors.Deserialize, turning a panic inside the library into an error.
func deserialize(buf []byte) (st safetensors.SafeTensors, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("nlpodyssey/safetensors panicked: %v", r)
		}
	}()
	return safetensors.Deserialize(buf)
}

// crossCheck verifies that the library found the same tensors at the same bytes as tune's validator.
func (f *safetensorsFile) crossCheck(st *safetensors.SafeTensors) error {
	if st.Len() != len(f.hdr.entries) {
		return fmt.Errorf("loaders: %s: nlpodyssey/safetensors found %d tensors, the header lists %d", f.path, st.Len(), len(f.hdr.entries))
	}
	for _, e := range f.hdr.entries {
		v, ok := st.Tensor(e.name)
		mine := f.entryData(&e)
		if !ok || len(v.Data()) != len(mine) || (len(mine) > 0 && unsafe.SliceData(v.Data()) != unsafe.SliceData(mine)) {
			return fmt.Errorf("loaders: %s: nlpodyssey/safetensors and tune disagree about tensor %q", f.path, e.name)
		}
	}
	return nil
}

// entryData returns the bytes of e from tune's own offsets.
func (f *safetensorsFile) entryData(e *stEntry) []byte {
	start := f.hdr.dataStart()
	return f.buf[start+e.begin : start+e.end : start+e.end]
}

// names returns the tensor names in file (data-offset) order.
func (f *safetensorsFile) names() []string {
	out := make([]string, len(f.hdr.entries))
	for i, e := range f.hdr.entries {
		out[i] = e.name
	}
	return out
}

// info describes the tensor name; ok is false when the file has no such tensor.
func (f *safetensorsFile) info(name string) (TensorInfo, bool) {
	i, ok := f.hdr.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	e := &f.hdr.entries[i]
	return TensorInfo{Name: name, DType: e.dtype, Shape: append([]int(nil), e.shape...), Bytes: int64(e.end - e.begin), File: f.path}, true
}

// tensor returns a zero-copy view of the tensor name, or an error naming the file when the tensor is absent or
// its dtype is one tune does not read.
func (f *safetensorsFile) tensor(name string) (HostTensor, error) {
	i, ok := f.hdr.byName[name]
	if !ok {
		return HostTensor{}, fmt.Errorf("loaders: %s: no tensor %q", f.path, name)
	}
	e := &f.hdr.entries[i]
	dt := safetensorsDTypes[e.dtype].tune
	if dt.Size() == 0 {
		return HostTensor{}, fmt.Errorf("loaders: %s: %w %s for tensor %q; tune reads F32, F16, BF16, I64 (and I32): convert the checkpoint (e.g. model.to(torch.float32) and save_pretrained)", f.path, ErrUnsupportedDType, e.dtype, name)
	}
	var data []byte
	if f.st != nil {
		v, _ := f.st.Tensor(name) // present: crossCheck matched every name
		data = v.Data()
	} else {
		data = f.entryData(e)
	}
	return HostTensor{Name: name, DType: dt, Shape: append([]int(nil), e.shape...), Data: data}, nil
}

// close releases the mapping; views handed out before become invalid.
func (f *safetensorsFile) close() error {
	f.st = nil
	f.buf = nil
	if f.release == nil {
		return nil
	}
	release := f.release
	f.release = nil
	if err := release(); err != nil {
		return fmt.Errorf("loaders: %s: unmap: %w", f.path, err)
	}
	return nil
}

// readWhole reads the rest of f (size bytes expected) into memory; the fallback when a file cannot be mapped.
func readWhole(f *os.File, size int64) ([]byte, func() error, error) {
	if size < 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("loaders: %s: cannot hold %d bytes in memory", f.Name(), size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, nil, fmt.Errorf("loaders: %s: %w", f.Name(), err)
	}
	return buf, func() error { return nil }, nil
}
