package loaders

import (
	"errors"
	"runtime/metrics"
	"strings"
	"testing"
	"unsafe"

	"github.com/nlpodyssey/safetensors"
)

// heapAllocs returns the bytes allocated on the heap so far by this process (runtime/metrics, no stop-the-world).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// allocSlack bounds what parsing a file of n bytes may allocate: a small multiple of n for the JSON tokens and
// entries, plus room for the allocator's per-span accounting. Anything sized from a declared length would exceed it.
func allocSlack(n int) uint64 { return 64*uint64(n) + 1<<20 }

// headerSentinels are the errors a corrupt file may give.
var headerSentinels = []error{ErrHeaderTooSmall, ErrHeaderTooLarge, ErrInvalidHeaderLength, ErrInvalidHeader,
	ErrInvalidOffset, ErrTensorInvalidInfo, ErrIncompleteMetadata}

// FuzzReadHeader feeds arbitrary bytes to the header parser and validator as a whole file. It must never panic,
// never allocate more than allocSlack(file size), reject with a named sentinel error that names the file, and,
// when it accepts, its entries must tile the data section and nlpodyssey/safetensors must agree with it.
//
//	go test -run XXX -fuzz FuzzReadHeader -fuzztime 5m -parallel 1 ./loaders
func FuzzReadHeader(f *testing.F) {
	for _, c := range corruptCases() {
		f.Add(c.file)
	}
	f.Add(b22File())
	f.Add(stFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F8_E4M3","shape":[2,3],"data_offsets":[8,14]},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 14)))
	f.Add(stFile(`{"e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},"s":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}  `, make([]byte, 4)))
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocs()
		h, err := parseSafetensorsHeader("fuzz.safetensors", data)
		if got := heapAllocs() - before; got > allocSlack(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(data), got)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "loaders: fuzz.safetensors: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			for _, s := range headerSentinels {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error %q wraps none of the header sentinels", err)
		}
		checkTiling(t, h, uint64(len(data)))
		if h.libOK {
			checkLibraryAgrees(t, h, data)
		}
	})
}

// checkTiling verifies that accepted entries cover the data section exactly, in order, each as large as its
// dtype and shape say.
func checkTiling(t *testing.T, h *stHeader, size uint64) {
	t.Helper()
	end := uint64(0)
	for i, e := range h.entries {
		want, ok := entryBytes(safetensorsDTypes[e.dtype].bits, e.shape)
		if e.begin != end || !ok || e.end-e.begin != want || h.byName[e.name] != i {
			t.Fatalf("accepted entry %+v after offset %d (want %d bytes)", e, end, want)
		}
		end = e.end
	}
	if h.dataStart()+end != size {
		t.Fatalf("accepted a file of %d bytes whose header and tensors cover %d", size, h.dataStart()+end)
	}
}

// checkLibraryAgrees verifies that nlpodyssey/safetensors accepts what tune accepted and sees the same tensors at
// the same bytes.
func checkLibraryAgrees(t *testing.T, h *stHeader, data []byte) {
	t.Helper()
	st, err := deserialize(data)
	if err != nil {
		t.Fatalf("tune accepted the file, nlpodyssey/safetensors rejects it: %v", err)
	}
	if st.Len() != len(h.entries) {
		t.Fatalf("library sees %d tensors, tune %d", st.Len(), len(h.entries))
	}
	for _, e := range h.entries {
		v, ok := st.Tensor(e.name)
		lib, _ := safetensors.ParseDType(e.dtype)
		start := h.dataStart() + e.begin
		if !ok || v.DType() != lib || uint64(len(v.Data())) != e.end-e.begin ||
			(len(v.Data()) > 0 && unsafe.SliceData(v.Data()) != &data[start]) {
			t.Fatalf("library and tune disagree on tensor %q", e.name)
		}
	}
}
