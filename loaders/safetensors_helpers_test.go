package loaders

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stFile assembles a safetensors file: the 8-byte little-endian length of header, header, then data.
func stFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

// stPrefix is an 8-byte length prefix declaring n header bytes, followed by rest.
func stPrefix(n uint64, rest string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
}

// padSpaces pads s with spaces to a multiple of 8 bytes, as the reference writer does.
func padSpaces(s string) string { return s + strings.Repeat(" ", (8-len(s)%8)%8) }

// writeTemp writes data to a file named name in a fresh temporary directory and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// le32 encodes float32 bit patterns given as uint32 little-endian.
func le32(words ...uint32) []byte {
	var out []byte
	for _, w := range words {
		out = binary.LittleEndian.AppendUint32(out, w)
	}
	return out
}

// b22Header is the 60-byte JSON of the smallest valid file (header padding and full coverage, safetensors/src/tensor.rs): {"test": I32 [2,2]} at [0,16].
const b22Header = `{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`

// b22File is that valid 88-byte file (safetensors/src/tensor.rs: header padded to 8 bytes, the file fully covered).
func b22File() []byte { return stFile(b22Header+"    ", make([]byte, 16)) }
