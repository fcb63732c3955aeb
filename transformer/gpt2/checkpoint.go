package gpt2

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// generationConfigName is the file transformers' GenerationConfig.save_pretrained writes beside config.json.
const generationConfigName = "generation_config.json"

// tensorSpec is one parameter as a checkpoint stores it: its canonical name, its shape in the file, and
// whether it is a Conv1D weight (stored (in, out), held (out, in) by the model).
type tensorSpec struct {
	name  string
	shape []int
	conv  bool
}

// tensorSpecs lists the tensors a GPT2LMHeadModel of cfg holds, in named_parameters() order, with their
// shapes in the file: the model's parameter list (namedParameters) with the Conv1D weights transposed. A test
// checks the two agree, so the name table has one source.
func tensorSpecs(cfg Config) []tensorSpec {
	c, inter := cfg.NEmbd, cfg.Inner()
	s := []tensorSpec{{"transformer.wte.weight", []int{cfg.VocabSize, c}, false}, {"transformer.wpe.weight", []int{cfg.NPositions, c}, false}}
	for i := range cfg.NLayer {
		pre := "transformer.h." + strconv.Itoa(i) + "."
		s = append(s,
			tensorSpec{pre + "ln_1.weight", []int{c}, false}, tensorSpec{pre + "ln_1.bias", []int{c}, false},
			tensorSpec{pre + "attn.c_attn.weight", []int{c, 3 * c}, true}, tensorSpec{pre + "attn.c_attn.bias", []int{3 * c}, false},
			tensorSpec{pre + "attn.c_proj.weight", []int{c, c}, true}, tensorSpec{pre + "attn.c_proj.bias", []int{c}, false},
			tensorSpec{pre + "ln_2.weight", []int{c}, false}, tensorSpec{pre + "ln_2.bias", []int{c}, false},
			tensorSpec{pre + "mlp.c_fc.weight", []int{c, inter}, true}, tensorSpec{pre + "mlp.c_fc.bias", []int{inter}, false},
			tensorSpec{pre + "mlp.c_proj.weight", []int{inter, c}, true}, tensorSpec{pre + "mlp.c_proj.bias", []int{c}, false},
		)
	}
	s = append(s, tensorSpec{"transformer.ln_f.weight", []int{c}, false}, tensorSpec{"transformer.ln_f.bias", []int{c}, false})
	if !cfg.TieWordEmbeddings {
		s = append(s, tensorSpec{"lm_head.weight", []int{cfg.VocabSize, c}, false})
	}
	return s
}

// isConv reports whether a canonical parameter name is a Conv1D weight.
func isConv(name string) bool {
	for _, suffix := range []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// canonical maps a checkpoint key to the canonical name it may fill: keys of a GPT2Model checkpoint (no
// "transformer." prefix: "h.0.attn.c_attn.weight", "wte.weight") gain the prefix.
func canonical(key string) string {
	if key == "lm_head.weight" || strings.HasPrefix(key, "transformer.") {
		return key
	}
	return "transformer." + key
}

// ignoreReason says why a checkpoint key is harmless to skip: the causal-mask buffers older transformers
// saved with every attention layer (attn.bias, the (1, 1, P, P) lower-triangular mask, and attn.masked_bias).
func ignoreReason(key string) string {
	if strings.HasSuffix(key, ".attn.bias") || strings.HasSuffix(key, ".attn.masked_bias") {
		return "buffer"
	}
	return ""
}

// mapCheckpoint matches the checkpoint's tensors (names and shapes from the headers) with the model's specs:
// it returns the checkpoint key of every canonical name found, and the report. A tied lm_head.weight in the
// checkpoint is listed as Tied (the model uses transformer.wte.weight, as transformers ties it).
func mapCheckpoint(specs []tensorSpec, infos []loaders.TensorInfo, tied bool) (map[string]string, *loaders.LoadReport) {
	r := &loaders.LoadReport{}
	byName := make(map[string]tensorSpec, len(specs))
	for _, s := range specs {
		byName[s.name] = s
	}
	source := map[string]string{}
	for _, ti := range infos {
		key := ti.Name
		if why := ignoreReason(key); why != "" {
			r.Ignored = append(r.Ignored, loaders.IgnoredTensor{Key: key, Reason: why})
			continue
		}
		name := canonical(key)
		if name == "lm_head.weight" && tied {
			r.Tied = append(r.Tied, loaders.TiedTensor{Name: name, Source: "transformer.wte.weight"})
			continue
		}
		s, ok := byName[name]
		if !ok {
			r.Unexpected = append(r.Unexpected, key)
			continue
		}
		if _, dup := source[name]; dup { // both "h.0.…" and "transformer.h.0.…": the second is not used
			r.Unexpected = append(r.Unexpected, key)
			continue
		}
		if !slices.Equal(ti.Shape, s.shape) {
			r.Mismatched = append(r.Mismatched, loaders.ShapeMismatch{Name: name, Key: key, Checkpoint: ti.Shape, Model: s.shape})
			continue
		}
		source[name] = key
		if key != name {
			r.Renamed = append(r.Renamed, loaders.RenamedTensor{Key: key, Name: name})
		}
		r.Matched++
	}
	for _, s := range specs {
		_, found := source[s.name]
		if !found && !slices.ContainsFunc(r.Mismatched, func(m loaders.ShapeMismatch) bool { return m.Name == s.name }) {
			r.Missing = append(r.Missing, s.name)
		}
	}
	return source, r
}

// LoadPretrained builds a GPT2LMHeadModel on b from a Hugging Face checkpoint directory: config.json
// (ReadConfig) and model.safetensors or a sharded index. Keys with and without the "transformer." prefix load
// (GPT2LMHeadModel and GPT2Model checkpoints), the attn.bias / attn.masked_bias buffers of older checkpoints
// are skipped, Conv1D weights are transposed from (in, out), and F16/BF16 tensors widen to the FP32 masters.
// A tied checkpoint needs no lm_head.weight. A missing, unexpected or mis-shaped tensor is an error naming it,
// found from the safetensors headers before the model is allocated. generation_config.json, when present, is
// kept and written back by Save.
func LoadPretrained(dir string, b tensor.Backend, opts transformer.LoadOptions) (m *GPT2LMHeadModel, report *transformer.LoadReport, err error) {
	defer recoverError(&err)
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "gpt2: load %s", dir)
	}
	defer ck.Close()
	specs := tensorSpecs(cfg)
	source, lr := mapCheckpoint(specs, ck.Infos(), cfg.TieWordEmbeddings)
	report = &transformer.LoadReport{LoadReport: lr, Architecture: "GPT2LMHeadModel"}
	var problems []string
	if len(lr.Missing) > 0 {
		problems = append(problems, "missing "+loaders.SummarizeNames(lr.Missing, 8))
	}
	for _, mm := range lr.Mismatched {
		problems = append(problems, mm.String())
	}
	if len(lr.Unexpected) > 0 {
		problems = append(problems, "unexpected "+loaders.SummarizeNames(lr.Unexpected, 8)+" (tune's GPT2LMHeadModel has "+
			"transformer.{wte,wpe,h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj},ln_f} and, untied, lm_head)")
	}
	if len(problems) > 0 {
		return nil, report, fmt.Errorf("gpt2: load %s: the checkpoint does not match the GPT2LMHeadModel its %s describes: %s",
			ck.Path, filepath.Join(dir, loaders.ConfigName), strings.Join(problems, "; "))
	}
	if m, err = newModel(b, cfg); err != nil {
		return nil, report, err
	}
	if err := m.SetAttnImplementation(opts.AttnImplementation); err != nil {
		return nil, report, err
	}
	if gen, err := os.ReadFile(filepath.Join(dir, generationConfigName)); err == nil {
		m.generation = gen
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, report, fmt.Errorf("gpt2: load %s: %w", dir, err)
	}
	for _, np := range m.namedParameters() {
		if err := m.loadParam(ck, source[np.Name], np); err != nil {
			return nil, report, errctx.Wrapf(err, "gpt2: load %s", ck.Path)
		}
	}
	m.WeightsUpdated()
	return m, report, nil
}

// loadParam copies checkpoint tensor key into np, transposing a Conv1D weight from (in, out).
func (m *GPT2LMHeadModel) loadParam(ck *loaders.Checkpoint, key string, np transformer.NamedParameter) error {
	ht, err := ck.Get(key)
	if err != nil {
		return errctx.Wrapf(err, "missing tensor %s", key)
	}
	v := np.Param.Value
	want := []int(v.Shape)
	if isConv(np.Name) {
		want = []int{v.Shape[1], v.Shape[0]}
	}
	if !slices.Equal(ht.Shape, want) {
		return fmt.Errorf("tensor %s has shape %v, the model's %s has %v", key, ht.Shape, np.Name, want)
	}
	vals, err := ht.Float32()
	if err != nil {
		return errctx.Wrapf(err, "tensor %s", key)
	}
	if isConv(np.Name) {
		vals = transpose(vals, want[0], want[1])
	}
	return m.b.Upload(v, vals)
}

// transpose returns the (cols, rows) transpose of a row-major (rows, cols) matrix.
func transpose(v []float32, rows, cols int) []float32 {
	out := make([]float32, len(v))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = v[i*cols+j]
		}
	}
	return out
}

// Save writes the model as transformers' save_pretrained does: config.json, model.safetensors (every
// parameter in F32 under its Hugging Face name, Conv1D weights (in, out), a tied lm_head.weight left out as
// transformers leaves it out; metadata {"format":"pt"}) and the generation_config.json the checkpoint came
// with, so GPT2LMHeadModel.from_pretrained(dir) loads it with no missing or unexpected keys.
func (m *GPT2LMHeadModel) Save(dir string) (err error) {
	defer recoverError(&err)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errctx.Wrap("gpt2: save", err)
	}
	list := m.namedParameters()
	hosts := make([]loaders.HostTensor, 0, len(list))
	for _, np := range list {
		v := np.Param.Value
		vals := make([]float32, v.Numel())
		if err := m.b.Download(vals, v); err != nil {
			return errctx.Wrapf(err, "gpt2: save: reading %s", np.Name)
		}
		shape := []int(v.Shape)
		if isConv(np.Name) {
			vals, shape = transpose(vals, shape[0], shape[1]), []int{shape[1], shape[0]}
		}
		ht, err := loaders.NewHostTensor(np.Name, tensor.F32, shape, vals)
		if err != nil {
			return errctx.Wrap("gpt2: save", err)
		}
		hosts = append(hosts, ht)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, loaders.SafetensorsWeightsName), hosts, map[string]string{"format": "pt"}); err != nil {
		return errctx.Wrap("gpt2: save", err)
	}
	if m.generation != nil {
		if err := atomicfile.WriteFile(filepath.Join(dir, generationConfigName), m.generation, 0o644); err != nil {
			return errctx.Wrap("gpt2: save", err)
		}
	}
	return m.SaveConfig(dir)
}

// SaveConfig writes dir/config.json alone (Config.WriteConfig); a LoRA adapter directory holds it too.
func (m *GPT2LMHeadModel) SaveConfig(dir string) error { return m.Config.WriteConfig(dir) }

// Load reads back into the model's parameters what Save wrote in dir (trainer.Loader): every parameter under
// its name and shape; any other tensor is an error. The weight-cast cache is invalidated.
func (m *GPT2LMHeadModel) Load(dir string) (err error) {
	defer recoverError(&err)
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return errctx.Wrap("gpt2: load", err)
	}
	defer ck.Close()
	source, lr := mapCheckpoint(tensorSpecs(m.Config), ck.Infos(), m.Config.TieWordEmbeddings)
	if !lr.OK() || len(lr.Unexpected) > 0 {
		return fmt.Errorf("gpt2: load %s: not a checkpoint of this model: %s", ck.Path, strings.TrimSpace(lr.String()))
	}
	for _, np := range m.namedParameters() {
		if err := m.loadParam(ck, source[np.Name], np); err != nil {
			return errctx.Wrapf(err, "gpt2: load %s", ck.Path)
		}
	}
	m.WeightsUpdated()
	return nil
}
