package loaders

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// SafetensorsWeightsName is the weights file of an unsharded checkpoint, as transformers' save_pretrained names it.
const SafetensorsWeightsName = "model.safetensors"

// ErrNoWeights: a checkpoint directory holds neither model.safetensors nor model.safetensors.index.json.
var ErrNoWeights = errors.New("no safetensors weights")

// Checkpoint is an open safetensors checkpoint: one file, or the shards of a model.safetensors.index.json. The
// files are memory-mapped, not read: opening validates every header, and Get hands out zero-copy views, so a
// checkpoint is never held twice in memory. Close releases the mappings and invalidates the views.
//
// A Checkpoint is safe for concurrent reads (Names, Info, Get); Close must not race with them.
type Checkpoint struct {
	// Path is the weights file or index that was opened.
	Path string
	// Index is the shard index of a sharded checkpoint; nil for a single file.
	Index *ShardIndex

	files []*safetensorsFile
	where map[string]*safetensorsFile
	names []string
}

// OpenCheckpoint opens a checkpoint given as a directory (model.safetensors, else model.safetensors.index.json),
// a .safetensors file, or a shard index (.json). Every file is validated completely; a corrupt one gives an error
// naming the file and the problem (see ErrHeaderTooLarge and its siblings). A directory without safetensors weights
// gives an error wrapping ErrNoWeights that says what it found instead. These errors are bad input
// (badinput.Is); one of the operating system's (a file that cannot be read) is not.
func OpenCheckpoint(path string) (*Checkpoint, error) {
	c, err := openCheckpoint(path)
	return c, badinput.Mark(err) // the file's contents are wrong (exit 2); a failed read (*fs.PathError) is not
}

// openCheckpoint is OpenCheckpoint without the bad-input mark.
func openCheckpoint(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	if st.IsDir() {
		single := filepath.Join(path, SafetensorsWeightsName)
		index := filepath.Join(path, SafetensorsIndexName)
		switch {
		case fileExists(single):
			path = single
		case fileExists(index):
			path = index
		default:
			return nil, noWeightsError(path)
		}
	}
	c := &Checkpoint{Path: path, where: map[string]*safetensorsFile{}}
	if strings.HasSuffix(path, ".json") {
		if c.Index, err = ReadShardIndex(path); err != nil {
			return nil, err
		}
		if c.files, err = openShards(c.Index); err != nil {
			return nil, err
		}
	} else {
		f, err := openSafetensorsFile(path)
		if err != nil {
			return nil, err
		}
		c.files = []*safetensorsFile{f}
	}
	for _, f := range c.files {
		for _, name := range f.names() {
			if other, dup := c.where[name]; dup {
				c.Close()
				return nil, fmt.Errorf("loaders: tensor %q is stored twice, in %s and in %s", name, other.path, f.path)
			}
			c.where[name] = f
			c.names = append(c.names, name)
		}
	}
	sort.Slice(c.names, func(i, j int) bool { return naturalLess(c.names[i], c.names[j]) })
	return c, nil
}

// noWeightsError explains what a directory without safetensors weights holds instead.
func noWeightsError(dir string) error {
	hint := ""
	if h := OtherWeightsHint(dir); h != "" {
		hint = " (" + h + ")"
	}
	return fmt.Errorf("loaders: %s: %w: neither %s nor %s is there%s", dir, ErrNoWeights, SafetensorsWeightsName, SafetensorsIndexName, hint)
}

// otherWeights are the weight files of other formats transformers saves, with the from_pretrained argument that
// reads them.
var otherWeights = []struct{ name, from string }{
	{"pytorch_model.bin", ""}, {"pytorch_model.bin.index.json", ""},
	{"tf_model.h5", ", from_tf=True"}, {"flax_model.msgpack", ", from_flax=True"},
}

// OtherWeightsHint says what a directory without safetensors weights holds instead, and what to do: for a
// PyTorch pickle (pytorch_model.bin, which tune does not read: unpickling runs code) or TensorFlow/Flax
// weights, the one-line transformers conversion that writes model.safetensors beside it, with the model class
// config.json's architectures names; for adapter_model.safetensors (.bin), that it is a PEFT adapter. "" when the
// directory holds none of these.
func OtherWeightsHint(dir string) string {
	if fileExists(filepath.Join(dir, "adapter_model.safetensors")) {
		return "found adapter_model.safetensors: a PEFT adapter; load its base model and apply the adapter"
	}
	if fileExists(filepath.Join(dir, "adapter_model.bin")) {
		return "found adapter_model.bin: a PEFT adapter in PyTorch's pickle format, which tune does not read; re-save it " +
			"with PEFT's save_pretrained(dir, safe_serialization=True) to get adapter_model.safetensors"
	}
	for _, w := range otherWeights {
		if !fileExists(filepath.Join(dir, w.name)) {
			continue
		}
		what := "TensorFlow/Flax weights"
		if w.from == "" {
			what = "PyTorch's pickle format, which tune does not read (loading a pickle can run code)"
		}
		return fmt.Sprintf("found %s: %s; convert it once with transformers: python -c 'from transformers import %s as M; "+
			"M.from_pretrained(\"%s\"%s).save_pretrained(\"%s\", safe_serialization=True)' writes %s beside it, "+
			"or fetch the model's safetensors files (tune download)", w.name, what, modelClass(dir), dir, w.from, dir, SafetensorsWeightsName)
	}
	return ""
}

// modelClass returns the transformers class config.json's architectures names first, or
// AutoModelForSequenceClassification when it names none.
func modelClass(dir string) string {
	var c struct {
		Architectures []string `json:"architectures"`
	}
	// The size check came after the whole file was read; smallfile refuses a large one, or a pipe, unread.
	if data, err := smallfile.Read(filepath.Join(dir, ConfigName)); err == nil && len(data) < 1<<20 {
		if json.Unmarshal(data, &c) == nil && len(c.Architectures) > 0 && isIdentifier(c.Architectures[0]) {
			return c.Architectures[0]
		}
	}
	return "AutoModelForSequenceClassification"
}

// isIdentifier reports whether s is a Python identifier of ASCII letters, digits and underscores.
func isIdentifier(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "" && len(s) < 100
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Names returns the tensor names in natural order (layer.2 before layer.10).
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Len returns the number of tensors.
func (c *Checkpoint) Len() int { return len(c.names) }

// Files returns the paths of the safetensors files, in shard order.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, f := range c.files {
		out[i] = f.path
	}
	return out
}

// Metadata returns the "__metadata__" of the (first) file, nil when it has none.
func (c *Checkpoint) Metadata() map[string]string {
	if len(c.files) == 0 || c.files[0].hdr == nil {
		return nil
	}
	return c.files[0].hdr.metadata
}

// Info describes the tensor name without touching its data; ok is false when there is no such tensor.
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	f, ok := c.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.info(name)
}

// Infos describes every tensor, in Names order.
func (c *Checkpoint) Infos() []TensorInfo {
	out := make([]TensorInfo, 0, len(c.names))
	for _, n := range c.names {
		ti, _ := c.Info(n)
		out = append(out, ti)
	}
	return out
}

// Get returns a zero-copy, read-only view of the tensor name (see HostTensor). It fails for a name the
// checkpoint lacks, for a dtype tune does not read (ErrUnsupportedDType: F64, U8, F8_*, ...), and after Close.
func (c *Checkpoint) Get(name string) (HostTensor, error) {
	if c.files == nil {
		return HostTensor{}, fmt.Errorf("loaders: %s: Get %q after Close", c.Path, name)
	}
	f, ok := c.where[name]
	if !ok {
		return HostTensor{}, badinput.Errorf("loaders: %s: no tensor %q", c.Path, name)
	}
	t, err := f.tensor(name)
	return t, badinput.Mark(err) // a dtype tune cannot compute with
}

// Close unmaps the files. HostTensors obtained from Get must not be used afterwards. Closing twice is harmless.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.close())
	}
	c.files = nil
	return errors.Join(errs...)
}

// naturalLess orders strings with embedded numbers by value ("layer.2" < "layer.10"), otherwise bytewise.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
