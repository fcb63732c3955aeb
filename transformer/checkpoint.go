package transformer

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// This file is the checkpoint plumbing the model families share: matching a Hugging Face checkpoint's tensors
// with the model's parameter list by name and shape (MatchCheckpoint), describing what did not match
// (CheckpointProblems), and copying tensors in (LoadParams) and out (SaveParams). A family supplies its naming
// rules (CheckpointRules); the names themselves always come from its parameter list, so there is one table.

// CheckpointTensor is one parameter as a checkpoint stores it: its canonical name and its shape in the file.
type CheckpointTensor struct {
	Name  string // the canonical Hugging Face name ("transformer.h.0.attn.c_attn.weight")
	Shape []int  // the shape in the file (a Transposed parameter's shape is the model's, swapped)
}

// CheckpointRules tell MatchCheckpoint, LoadParams and SaveParams how a family's checkpoints differ from its
// parameter list.
type CheckpointRules struct {
	// Canonical maps a checkpoint key to the name it fills, given the names the model wants, with ok false when
	// it fills none. It covers layouts without the head model's prefix (GPT2Model's "h.0…" for
	// "transformer.h.0…", LlamaModel's "layers.0…" for "model.layers.0…"). nil: a key is its own name.
	Canonical func(key string, want map[string]bool) (name string, ok bool)
	// Ignore returns why a checkpoint key that fills no name is harmless to skip ("buffer"), or "".
	Ignore func(key string) string
	// Tied maps the name of a tied tensor the model does not hold separately ("lm_head.weight") to the name it
	// shares; such a key in the checkpoint is reported as Tied, not unexpected.
	Tied map[string]string
	// Transposed reports the parameters a checkpoint stores transposed relative to the model: transformers'
	// Conv1D weights are (in, out), the model's Linear weights (out, in). nil: none.
	Transposed func(name string) bool
}

func (r CheckpointRules) transposed(name string) bool {
	return r.Transposed != nil && r.Transposed(name)
}

// CheckpointTensors returns list's parameters with their shapes as the checkpoint stores them.
func CheckpointTensors(list []NamedParameter, rules CheckpointRules) []CheckpointTensor {
	out := make([]CheckpointTensor, len(list))
	for i, np := range list {
		s := slices.Clone([]int(np.Param.Value.Shape))
		if rules.transposed(np.Name) && len(s) == 2 {
			s[0], s[1] = s[1], s[0]
		}
		out[i] = CheckpointTensor{Name: np.Name, Shape: s}
	}
	return out
}

// MatchCheckpoint pairs the tensors a model expects (specs, in the checkpoint's layout; CheckpointTensors)
// with a checkpoint's (Checkpoint.Infos: names and shapes from the headers, nothing read) and returns the
// checkpoint key of every name found and the report: matched, renamed (a key filling another name),
// mis-shaped, of a dtype that is not F32, F16 or BF16 (WrongDType), missing, unexpected, ignored (rules.Ignore) and
// tied (rules.Tied) tensors. When two keys fill
// one name, the second is unexpected.
func MatchCheckpoint(specs []CheckpointTensor, infos []loaders.TensorInfo, rules CheckpointRules) (map[string]string, *loaders.LoadReport) {
	r := &loaders.LoadReport{}
	want := make(map[string]bool, len(specs))
	shape := make(map[string][]int, len(specs))
	for _, s := range specs {
		want[s.Name], shape[s.Name] = true, s.Shape
	}
	canonical := rules.Canonical
	if canonical == nil {
		canonical = func(key string, want map[string]bool) (string, bool) { return key, want[key] }
	}
	source := map[string]string{}
	mismatched := map[string]bool{}
	for _, ti := range infos {
		name, ok := canonical(ti.Name, want)
		switch {
		case ok && source[name] != "":
			r.Unexpected = append(r.Unexpected, ti.Name)
		case ok && !slices.Equal(ti.Shape, shape[name]):
			r.Mismatched = append(r.Mismatched, loaders.ShapeMismatch{Name: name, Key: ti.Name, Checkpoint: ti.Shape, Model: shape[name]})
			mismatched[name] = true
		case ok && ti.DType != "" && !loaders.IsWeightDType(ti.DType): // "": a TensorInfo written by hand
			r.WrongDType = append(r.WrongDType, loaders.DTypeMismatch{Name: name, Key: ti.Name, DType: ti.DType})
			mismatched[name] = true
		case ok:
			source[name] = ti.Name
			r.Matched++
			if name != ti.Name {
				r.Renamed = append(r.Renamed, loaders.RenamedTensor{Key: ti.Name, Name: name})
			}
		case rules.Ignore != nil && rules.Ignore(ti.Name) != "":
			r.Ignored = append(r.Ignored, loaders.IgnoredTensor{Key: ti.Name, Reason: rules.Ignore(ti.Name)})
		case rules.Tied[ti.Name] != "":
			r.Tied = append(r.Tied, loaders.TiedTensor{Name: ti.Name, Source: rules.Tied[ti.Name]})
		default:
			r.Unexpected = append(r.Unexpected, ti.Name)
		}
	}
	for _, s := range specs {
		if source[s.Name] == "" && !mismatched[s.Name] {
			r.Missing = append(r.Missing, s.Name)
		}
	}
	return source, r
}

// CheckpointProblems describes a report's missing, unexpected, mis-shaped and wrong-dtype tensors in one clause each, or
// returns "" when there are none (the checkpoint is exactly the model).
func CheckpointProblems(r *loaders.LoadReport) string {
	var s []string
	if len(r.Missing) > 0 {
		s = append(s, fmt.Sprintf("%d tensors missing from the checkpoint: %s", len(r.Missing), loaders.SummarizeNames(r.Missing, 8)))
	}
	if len(r.Unexpected) > 0 {
		s = append(s, fmt.Sprintf("%d tensors the model does not have: %s", len(r.Unexpected), loaders.SummarizeNames(r.Unexpected, 8)))
	}
	switch n := len(r.Mismatched); {
	case n == 1:
		s = append(s, r.Mismatched[0].String())
	case n > 1: // the first few and a count: a config of another size mismatches every tensor of the model
		shown := make([]string, 0, 3)
		for _, mm := range r.Mismatched[:min(n, 3)] {
			shown = append(shown, mm.String())
		}
		more := ""
		if n > 3 {
			more = fmt.Sprintf(", and %d more", n-3)
		}
		s = append(s, fmt.Sprintf("%d tensors of another shape: %s%s", n, strings.Join(shown, ", "), more))
	}
	if len(r.WrongDType) > 0 {
		s = append(s, r.DTypeProblems())
	}
	return strings.Join(s, "; ")
}

// LoadParams copies every parameter of list from its checkpoint tensor source[name] (MatchCheckpoint's
// result), widening F16/BF16 to the FP32 master and transposing the rules' Transposed ones. Shapes were
// matched; a read error names the tensor.
func LoadParams(b tensor.Backend, ck *loaders.Checkpoint, list []NamedParameter, source map[string]string, rules CheckpointRules) error {
	for _, np := range list {
		key := source[np.Name]
		ht, err := ck.Get(key)
		if err != nil {
			return errctx.Wrapf(err, "tensor %s", key)
		}
		vals, err := ht.Float32()
		if err != nil {
			return errctx.Wrapf(err, "tensor %s", key)
		}
		if rules.transposed(np.Name) {
			vals = transpose2D(vals, ht.Shape[0], ht.Shape[1])
		}
		if err := b.Upload(np.Param.Value, vals); err != nil {
			return errctx.Wrapf(err, "tensor %s", key)
		}
	}
	return nil
}

// ReloadParams reads back into list what SaveParams wrote in dir (a model's Load, trainer.Loader): every
// parameter under its name and checkpoint shape, and no other tensor, since the directory is expected to hold
// this model. Errors start with family ("gpt2: load ...").
func ReloadParams(family string, b tensor.Backend, dir string, list []NamedParameter, rules CheckpointRules) error {
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return errctx.Wrap(family+": load", err)
	}
	defer ck.Close()
	source, lr := MatchCheckpoint(CheckpointTensors(list, rules), ck.Infos(), rules)
	if p := CheckpointProblems(lr); p != "" {
		return badinput.Errorf("%s: load %s: not a checkpoint of this model: %s", family, ck.Path, p)
	}
	if err := LoadParams(b, ck, list, source, rules); err != nil {
		return errctx.Wrapf(err, "%s: load %s", family, ck.Path)
	}
	return nil
}

// SaveParams writes list into dir as transformers' save_pretrained(max_shard_size=maxShardBytes) does
// (loaders.WriteCheckpoint: model.safetensors, or shards with an index above the limit; ≤ 0 means no limit):
// every parameter in F32 under its name, the rules' Transposed ones back in the checkpoint's layout. dir is
// created if needed.
func SaveParams(b tensor.Backend, dir string, list []NamedParameter, rules CheckpointRules, maxShardBytes int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	hosts := make([]loaders.HostTensor, 0, len(list))
	for _, np := range list {
		v := np.Param.Value
		vals := make([]float32, v.Numel())
		if err := b.Download(vals, v); err != nil {
			return errctx.Wrapf(err, "reading %s", np.Name)
		}
		shape := []int(v.Shape)
		if rules.transposed(np.Name) {
			vals, shape = transpose2D(vals, shape[0], shape[1]), []int{shape[1], shape[0]}
		}
		ht, err := loaders.NewHostTensor(np.Name, tensor.F32, shape, vals)
		if err != nil {
			return err
		}
		hosts = append(hosts, ht)
	}
	_, err := loaders.WriteCheckpoint(dir, hosts, maxShardBytes)
	return err
}

// transpose2D returns the (cols, rows) transpose of a row-major (rows, cols) matrix.
func transpose2D(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = v[i*cols+j]
		}
	}
	return out
}

// CheckpointLayers returns how many layers a checkpoint's tensors hold: one more than the largest N of a name
// that is one of prefixes followed by "N." ("model.layers.", and "layers." for a base-model checkpoint), or 0
// when no name is.
func CheckpointLayers(infos []loaders.TensorInfo, prefixes ...string) int {
	layers := 0
	for _, ti := range infos {
		for _, p := range prefixes {
			rest, ok := strings.CutPrefix(ti.Name, p)
			if !ok {
				continue
			}
			if i := strings.IndexByte(rest, '.'); i > 0 {
				if n, err := strconv.Atoi(rest[:i]); err == nil && n >= layers {
					layers = n + 1
				}
			}
		}
	}
	return layers
}

// CheckLayerCount refuses a config.json (at configPath) whose layer count n, under key, exceeds the layers the
// checkpoint ck holds (CheckpointLayers of prefixes, the first naming the layers in the message). Every layer's
// weights come from the checkpoint, and the tensor list a config implies grows with its layer count, so a
// family compares the two before it lists, matches or allocates anything by the config's sizes: a config.json
// edited to 10000000 layers beside two layers of weights is refused from the headers alone, and memory stays
// bounded by the checkpoint's tensor list.
func CheckLayerCount(configPath, key string, n int, ck *loaders.Checkpoint, prefixes ...string) error {
	layers := CheckpointLayers(ck.Infos(), prefixes...)
	if n <= layers {
		return nil
	}
	held := fmt.Sprintf("no layers (no tensor named %sN.*)", prefixes[0])
	if layers > 0 {
		held = fmt.Sprintf("%d layers (%s0 to %s%d)", layers, prefixes[0], prefixes[0], layers-1)
	}
	return badinput.Errorf("%s has %s %d but the checkpoint %s holds %s: config.json does not describe these weights",
		configPath, key, n, ck.Path, held)
}
