package loaders

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
)

// Errors LoadReport.Err wraps.
var (
	// ErrMissingTensors: the model expects tensors the checkpoint does not hold.
	ErrMissingTensors = badinput.New("tensors missing from the checkpoint")
	// ErrShapeMismatch: a checkpoint tensor's shape differs from the model's.
	ErrShapeMismatch = badinput.New("tensor shapes differ from the model's")
	// ErrDTypeMismatch: a checkpoint tensor the model takes as a weight is not F32, F16 or BF16.
	ErrDTypeMismatch = badinput.New("tensors of a dtype the model cannot take")
)

// ShapeMismatch is a checkpoint tensor whose shape differs from the model's.
type ShapeMismatch struct {
	Name       string // canonical name
	Key        string // name in the checkpoint
	Checkpoint []int  // the shape stored in the checkpoint
	Model      []int  // the shape the model's config implies
}

// DTypeMismatch is a checkpoint tensor under a name the model expects whose dtype is not one its weights are
// read from (F32, F16 or BF16): an integer tensor (I32, I64, ...), or a floating-point dtype tune does not read
// (F64, F8_E4M3, ...).
type DTypeMismatch struct {
	Name  string // canonical name
	Key   string // name in the checkpoint
	DType string // the safetensors dtype stored ("I32")
}

// String formats a mismatch as "name is I32, but the model needs a floating-point tensor (F32, F16 or BF16)
// here" (with the checkpoint key when it differs).
func (m DTypeMismatch) String() string {
	name := m.Name
	if m.Key != m.Name {
		name += " (" + m.Key + ")"
	}
	return fmt.Sprintf("%s is %s, but the model needs a floating-point tensor (F32, F16 or BF16) here", name, m.DType)
}

// IsWeightDType reports whether a safetensors dtype is one a model's weights are read from: F32, F16 or BF16.
func IsWeightDType(dtype string) bool { return dtype == "F32" || dtype == "F16" || dtype == "BF16" }

// IgnoredTensor is a checkpoint tensor the model does not use, known to be harmless.
type IgnoredTensor struct {
	Key    string // name in the checkpoint
	Reason string // "buffer", "pretraining head cls.predictions", ...
}

// TiedTensor is a tensor the model expects that the checkpoint does not store because it is tied to Source.
type TiedTensor struct {
	Name, Source string // canonical names: the tied tensor ("cls.predictions.decoder.weight") and the one it shares
}

// RenamedTensor is a checkpoint key that matched the canonical name Name after renaming (legacy LayerNorm
// gamma/beta, the "bert." prefix added or removed, or a tied alias standing in for its source).
type RenamedTensor struct {
	Key, Name string // the checkpoint's key ("bert.embeddings.LayerNorm.gamma") and the canonical name it filled
}

// LoadReport says how a checkpoint's tensors matched a model's, by name: what is missing, unexpected, mis-shaped,
// ignored as harmless, tied, or matched under another name. String prints it for people; Err turns the missing
// and mis-shaped tensors into an error for callers that need a complete load.
type LoadReport struct {
	Matched    int             // expected tensors found with the right shape
	Missing    []string        // canonical names the model expects that the checkpoint lacks (and are not tied)
	Unexpected []string        // checkpoint keys the model does not use and that are not known to be harmless
	Mismatched []ShapeMismatch // tensors found under a matching name with another shape; not loaded
	WrongDType []DTypeMismatch // tensors found under a matching name with a dtype that is not F32, F16 or BF16; not loaded
	Ignored    []IgnoredTensor // checkpoint keys known to be unused: buffers, pretraining heads
	Tied       []TiedTensor    // expected tensors the checkpoint does not store because they share another's data
	Renamed    []RenamedTensor // checkpoint keys matched under another name
}

// MapBertCheckpoint matches the tensors a model expects (canonical transformers names, e.g. from
// BertSequenceClassificationTensors) with a checkpoint's tensors (Checkpoint.Infos), through the BERT name table:
// keys with or without the "bert." prefix, LayerNorm.gamma/beta as weight/bias, position_ids buffers and
// pretraining heads ignored, and tied tensors (cls.predictions.decoder.* ; the decoder weight only when
// cfg.TieWordEmbeddings, cfg nil meaning transformers' default true) not reported missing.
//
// It returns the mapping from each expected name to the checkpoint key to load it from, and the report. A
// mis-shaped tensor is reported and left out of the mapping; tied tensors are left out too (the model re-ties them).
func MapBertCheckpoint(expected []TensorSpec, ckpt []TensorInfo, cfg *BertConfig) (map[string]string, *LoadReport) {
	want := make(map[string][]int, len(expected))
	for _, e := range expected {
		want[e.Name] = e.Shape
	}
	have := make(map[string][]int, len(ckpt))
	dtype := make(map[string]string, len(ckpt))
	keys := make([]string, 0, len(ckpt))
	for _, ti := range ckpt {
		have[ti.Name], dtype[ti.Name] = ti.Shape, ti.DType
		keys = append(keys, ti.Name)
	}
	sort.Slice(keys, func(i, j int) bool { return naturalLess(keys[i], keys[j]) })

	r := &LoadReport{}
	source := map[string]string{} // expected name → checkpoint key
	var pending []string
	for _, k := range keys { // exact names first, so a renamed duplicate never displaces them
		if _, ok := want[k]; ok {
			source[k] = k
		} else {
			pending = append(pending, k)
		}
	}
	for _, k := range pending {
		matched := false
		for _, c := range bertCandidates(k) {
			if _, ok := want[c]; ok {
				if _, taken := source[c]; !taken {
					source[c] = k
					r.Renamed = append(r.Renamed, RenamedTensor{Key: k, Name: c})
					matched = true
				}
				break
			}
		}
		switch {
		case matched:
		case bertIgnoreReason(k) != "":
			r.Ignored = append(r.Ignored, IgnoredTensor{Key: k, Reason: bertIgnoreReason(k)})
		default:
			r.Unexpected = append(r.Unexpected, k)
		}
	}
	tieWordEmbeddings := cfg == nil || cfg.TieWordEmbeddings
	for _, tie := range bertTies {
		if tie.needsTieEmbeddings && !tieWordEmbeddings {
			continue
		}
		_, wantName := want[tie.name]
		_, wantSource := want[tie.source]
		_, haveName := source[tie.name]
		_, haveSource := source[tie.source]
		switch {
		case !wantName || !wantSource:
		case !haveName: // not saved, as transformers saves tied tensors; a missing source is reported as missing
			r.Tied = append(r.Tied, TiedTensor{Name: tie.name, Source: tie.source})
		case !haveSource: // only the alias was saved: it stands for the source
			source[tie.source] = source[tie.name]
			r.Renamed = append(r.Renamed, RenamedTensor{Key: source[tie.name], Name: tie.source})
			delete(source, tie.name)
			r.Tied = append(r.Tied, TiedTensor{Name: tie.name, Source: tie.source})
		}
	}
	tied := map[string]bool{}
	for _, t := range r.Tied {
		tied[t.Name] = true
	}
	for _, e := range expected {
		k, ok := source[e.Name]
		switch {
		case tied[e.Name]:
		case !ok:
			r.Missing = append(r.Missing, e.Name)
		case !slices.Equal(have[k], e.Shape):
			r.Mismatched = append(r.Mismatched, ShapeMismatch{Name: e.Name, Key: k, Checkpoint: have[k], Model: e.Shape})
			delete(source, e.Name)
		case dtype[k] != "" && !IsWeightDType(dtype[k]): // "": a TensorInfo written by hand, without a dtype
			r.WrongDType = append(r.WrongDType, DTypeMismatch{Name: e.Name, Key: k, DType: dtype[k]})
			delete(source, e.Name)
		default:
			r.Matched++
		}
	}
	return source, r
}

// OK reports whether every expected tensor was found (or is tied) with the right shape and a floating-point dtype.
func (r *LoadReport) OK() bool {
	return len(r.Missing) == 0 && len(r.Mismatched) == 0 && len(r.WrongDType) == 0
}

// errShown is how many mis-shaped tensors Err lists before counting the rest.
const errShown = 5

// Err returns nil when OK, else an error wrapping ErrMissingTensors and/or ErrShapeMismatch that names them
// compactly: the missing tensors summarised by module (SummarizeNames), the first few mis-shaped ones one per
// line with both shapes, then how many more (String lists them all). Unexpected and ignored tensors are not
// errors (transformers only warns about them).
func (r *LoadReport) Err() error {
	var errs []error
	if n := len(r.Missing); n > 0 {
		errs = append(errs, fmt.Errorf("loaders: %w (%d): %s", ErrMissingTensors, n, SummarizeNames(r.Missing, 8)))
	}
	if n := len(r.Mismatched); n > 0 {
		var b strings.Builder
		for _, m := range r.Mismatched[:min(n, errShown)] {
			b.WriteString("\n  " + m.String())
		}
		if n > errShown {
			fmt.Fprintf(&b, "\n  and %d more", n-errShown)
		}
		errs = append(errs, fmt.Errorf("loaders: %w (%d of %d; start from a checkpoint with the same config, or re-initialise these tensors):%s",
			ErrShapeMismatch, n, n+r.Matched, b.String()))
	}
	if n := len(r.WrongDType); n > 0 {
		errs = append(errs, fmt.Errorf("loaders: %w (%d): %s", ErrDTypeMismatch, n, r.DTypeProblems()))
	}
	return errors.Join(errs...)
}

// DTypeProblems lists the first few WrongDType tensors (DTypeMismatch.String), separated by "; ", then how many
// more, then what to do; "" when there are none.
func (r *LoadReport) DTypeProblems() string {
	n := len(r.WrongDType)
	if n == 0 {
		return ""
	}
	parts := make([]string, 0, min(n, errShown)+2)
	integer := false
	for i, m := range r.WrongDType {
		if i < errShown {
			parts = append(parts, m.String())
		}
		integer = integer || !strings.HasPrefix(m.DType, "F") // I8…I64, U8…U64, BOOL
	}
	if n > errShown {
		parts = append(parts, fmt.Sprintf("and %d more", n-errShown))
	}
	if integer {
		// torch's Module.to(dtype) casts only floating-point tensors: no conversion repairs an integer weight.
		parts = append(parts, "a weight stored as integers is a damaged or wrongly exported file: save the model again, or download it again")
	} else {
		parts = append(parts, "convert the checkpoint to F32, F16 or BF16 (in transformers: model.to(torch.float32), then save_pretrained)")
	}
	return strings.Join(parts, "; ")
}

// String formats a mismatch as "name: checkpoint [3 768], model [2 768]" (with the checkpoint key when it differs).
func (m ShapeMismatch) String() string {
	name := m.Name
	if m.Key != m.Name {
		name += " (" + m.Key + ")"
	}
	return fmt.Sprintf("%s: checkpoint %v, model %v", name, m.Checkpoint, m.Model)
}

// String prints the report: a summary line, then one line per non-empty category listing the tensors by name
// (renames and ignored tensors are summarised by kind).
func (r *LoadReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d tensors matched (%d renamed), %d missing, %d mis-shaped, %d unexpected, %d ignored, %d tied",
		r.Matched, len(r.Renamed), len(r.Missing), len(r.Mismatched), len(r.Unexpected), len(r.Ignored), len(r.Tied))
	if len(r.WrongDType) > 0 {
		fmt.Fprintf(&b, ", %d of another dtype", len(r.WrongDType))
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, "\nmissing: %s", strings.Join(r.Missing, ", "))
	}
	for _, m := range r.Mismatched {
		fmt.Fprintf(&b, "\nmis-shaped: %s", m)
	}
	for _, m := range r.WrongDType {
		fmt.Fprintf(&b, "\nwrong dtype: %s", m)
	}
	if len(r.Unexpected) > 0 {
		fmt.Fprintf(&b, "\nunexpected (not used by the model): %s", strings.Join(r.Unexpected, ", "))
	}
	if len(r.Ignored) > 0 {
		var order []string
		count := map[string]int{}
		example := map[string]string{}
		for _, ig := range r.Ignored {
			if count[ig.Reason] == 0 {
				order = append(order, ig.Reason)
				example[ig.Reason] = ig.Key
			}
			count[ig.Reason]++
		}
		var parts []string
		for _, reason := range order {
			parts = append(parts, fmt.Sprintf("%d %s (e.g. %s)", count[reason], reason, example[reason]))
		}
		fmt.Fprintf(&b, "\nignored: %s", strings.Join(parts, "; "))
	}
	for _, t := range r.Tied {
		fmt.Fprintf(&b, "\ntied: %s shares %s", t.Name, t.Source)
	}
	if len(r.Renamed) > 0 {
		fmt.Fprintf(&b, "\nrenamed: %d, e.g. %s -> %s", len(r.Renamed), r.Renamed[0].Key, r.Renamed[0].Name)
	}
	return b.String()
}

// SummarizeNames lists tensor names compactly for a message: the names under one numbered module are folded
// into "prefix.* (n tensors)" ("bert.encoder.layer.1.* (16 tensors)"; a module with one tensor keeps its name),
// other names are kept, in first-seen order; after limit entries (limit ≤ 0: no limit) the rest are counted
// ("and 12 more").
func SummarizeNames(names []string, limit int) string {
	var order []string
	count, first := map[string]int{}, map[string]string{}
	for _, n := range names {
		key := n
		parts := strings.Split(n, ".")
		for i, p := range parts[:len(parts)-1] {
			if _, err := strconv.Atoi(p); err == nil {
				key = strings.Join(parts[:i+1], ".") + ".*"
				break
			}
		}
		if count[key] == 0 {
			order, first[key] = append(order, key), n
		}
		count[key]++
	}
	var out []string
	for i, key := range order {
		if limit > 0 && i == limit {
			out = append(out, fmt.Sprintf("and %d more", len(order)-limit))
			break
		}
		if count[key] > 1 {
			out = append(out, fmt.Sprintf("%s (%d tensors)", key, count[key]))
		} else {
			out = append(out, first[key])
		}
	}
	return strings.Join(out, ", ")
}
