package lora

import (
	"errors"
	"fmt"
	"github.com/tune-ml/tune/transformer/bert"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// AdapterWeightsName is the file PEFT's save_pretrained writes the adapter's tensors to.
const AdapterWeightsName = "adapter_model.safetensors"

// keyPrefix starts every key of a PEFT adapter file: PeftModel.base_model (the LoraModel) .model (the wrapped
// transformers model).
const keyPrefix = "base_model.model."

// savedKey returns the adapter-file key of the in-memory parameter name (peft/utils/save_and_load.py): the PEFT prefix, and for
// lora_A/lora_B the adapter name removed ("…query.lora_A.default.weight" → "base_model.model.…query.lora_A.weight").
// Module paths and every other name are kept as they are, modules_to_save included ("classifier.weight").
func savedKey(name string) string {
	for _, ab := range []string{".lora_A.", ".lora_B."} {
		name = strings.Replace(name, ab+adapterName+".", ab, 1)
	}
	return keyPrefix + name
}

// memoryName is savedKey's inverse: the in-memory parameter name of an adapter-file key, or false when the key
// lacks the PEFT prefix. A key that already carries the adapter name (older files) is accepted as is.
func memoryName(key string) (string, bool) {
	name, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", false
	}
	for _, ab := range []string{".lora_A.", ".lora_B."} {
		if strings.Contains(name, ab) && !strings.Contains(name, ab+adapterName+".") {
			name = strings.Replace(name, ab, ab+adapterName+".", 1)
		}
	}
	return name, true
}

// Save writes the adapter into dir as PEFT's save_pretrained does (peft/tuners/lora/config.py; peft/utils/save_and_load.py; the classifier saved with the adapter, modules_to_save in peft/utils/save_and_load.py):
// adapter_config.json (the normalized Config, see MarshalAdapterConfig) and adapter_model.safetensors holding,
// in F32 with metadata {"format":"pt"}, every parameter the adapter trains under its PEFT key:
//
//	base_model.model.<module>.lora_A.weight (R, In) and .lora_B.weight (Out, R) per adapted module
//	base_model.model.<module>.<param> for each modules_to_save module (the classifier's weight and bias)
//	the trained biases: with bias "all" every bias, with "lora_only" <module>.base_layer.bias per adapted module
//
// (PEFT 0.21 looks for lora_only biases under <module>.bias, which a wrapped layer does not have, and so saves
// none; tune saves them under the name PEFT's loader puts them back from.) When the base model can write its
// config alone (SaveConfig, as *bert.BertForSequenceClassification does), dir also gets config.json: the
// base config with the run's label names (id2label/label2id) and num_labels, which SavedLabels reads back and
// transformers' AutoConfig.from_pretrained(dir) reads; PEFT's loaders ignore it. dir is created if needed; each
// file is written to a temporary file and renamed into place. The trainer calls Save for its checkpoints.
func (m *Model) Save(dir string) error {
	if err := m.usable(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errctx.Wrap("lora: save", err)
	}
	var hosts []loaders.HostTensor
	for _, np := range m.NamedParameters() {
		if !m.trains(np.Name) {
			continue
		}
		vals := make([]float32, np.Value.Numel())
		if err := m.Backend().Download(vals, np.Value); err != nil {
			return errctx.Wrapf(err, "lora: save: reading %s", np.Name)
		}
		ht, err := loaders.NewHostTensor(savedKey(np.Name), tensor.F32, np.Value.Shape, vals)
		if err != nil {
			return errctx.Wrap("lora: save", err)
		}
		hosts = append(hosts, ht)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, AdapterWeightsName), hosts, nil); err != nil {
		return errctx.Wrap("lora: save", err)
	}
	if cs, ok := m.Base.(configSaver); ok {
		if err := cs.SaveConfig(dir); err != nil {
			return errctx.Wrap("lora: save: the base config", err)
		}
	}
	return WriteAdapterConfig(dir, m.config, m.BaseModelNameOrPath)
}

// configSaver is implemented by a Base that can write its config.json alone.
type configSaver interface {
	SaveConfig(dir string) error
}

var _ configSaver = (*bert.BertForSequenceClassification)(nil)

// Load reads back into the adapter the weights Save (or PEFT) wrote in dir (trainer.Loader, used to resume
// and for load_best_model_at_end). dir's adapter_config.json must describe the same adapter: r, lora_alpha,
// use_rslora, bias, and the same targeted and saved modules, else the error names the first difference.
// See LoadAdapter for how the tensors are matched.
func (m *Model) Load(dir string) error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.merged {
		return fmt.Errorf("lora: load %s: %w; call Unmerge before loading other adapter weights", dir, ErrMerged)
	}
	cfg, _, err := ReadAdapterConfig(dir)
	if err != nil {
		return err
	}
	cfg.Normalize()
	if err := m.sameAdapter(cfg); err != nil {
		return errctx.Wrapf(err, "lora: load %s", dir)
	}
	return m.loadWeights(dir)
}

// sameAdapter reports the first field in which cfg would build a different adapter than m's.
func (m *Model) sameAdapter(cfg Config) error {
	c := m.config
	switch {
	case cfg.R != c.R:
		return fmt.Errorf("the adapter has r %d, the model's adapters r %d", cfg.R, c.R)
	case cfg.Scaling() != c.Scaling():
		return fmt.Errorf("the adapter's scaling is %v (lora_alpha %v, use_rslora %v), the model's %v (lora_alpha %v, use_rslora %v)",
			cfg.Scaling(), cfg.LoraAlpha, cfg.UseRSLoRA, c.Scaling(), c.LoraAlpha, c.UseRSLoRA)
	case cfg.Bias != c.Bias:
		return fmt.Errorf("the adapter has bias %q, the model's adapters %q", cfg.Bias, c.Bias)
	}
	var paths []string
	for _, p := range m.Projections() {
		paths = append(paths, p.Path)
	}
	targets, err := cfg.Select(paths)
	if err != nil {
		return err
	}
	if !slices.Equal(targets, m.targets) {
		return fmt.Errorf("the adapter targets %v, the model's adapters %v", targets, m.targets)
	}
	other := &Model{Base: m.Base, config: cfg}
	if saved, _ := other.findSaved(); !slices.Equal(saved, m.saved) {
		return fmt.Errorf("the adapter saves modules %v, the model %v", saved, m.saved)
	}
	return nil
}

// LoadAdapter reads the PEFT adapter in dir (adapter_config.json and adapter_model.safetensors, written by PEFT
// or by Save) onto base, a freshly loaded base model, as PeftModel.from_pretrained does: Apply with the file's
// config, then every tensor of the file into its parameter. Keys are PEFT's (peft/utils/save_and_load.py; the adapter name may
// be absent, as PEFT writes them, or present); F16 and BF16 tensors are widened to the FP32 masters.
//
// Matching is strict where a mismatch means the wrong adapter or base: a missing lora_A/lora_B or modules_to_save
// tensor, a key the adapter does not train, and a shape mismatch are errors naming the keys. A missing bias is
// allowed (the base's value is kept, as PEFT keeps it) and noted in Warnings. The returned model's adapters are
// trainable; BaseModelNameOrPath is the file's base_model_name_or_path.
func LoadAdapter(base Base, dir string) (*Model, error) {
	cfg, baseName, err := ReadAdapterConfig(dir)
	if err != nil {
		return nil, err
	}
	// r from the headers first: an r the weights do not have (1e9 beside rank-8 weights) would size adapters
	// for it, which Apply refuses as too large for memory instead of naming the mismatch.
	if err := CheckWeightsRank(dir, cfg.R); err != nil {
		return nil, err
	}
	m, err := Apply(base, cfg, 0)
	if err != nil {
		err = errctx.Wrapf(err, "lora: applying the adapter in %s", dir)
		if errors.Is(err, ErrNoTargets) {
			// The file's target_modules name no Linear of this base: the file's contents are wrong (or the
			// base is another model), as every other bad adapter_config.json value is bad input.
			return nil, badinput.Mark(fmt.Errorf("%w (file %s)", err, filepath.Join(dir, AdapterConfigName)))
		}
		return nil, err
	}
	m.BaseModelNameOrPath = baseName
	if err := m.loadWeights(dir); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckWeightsRank compares r (adapter_config.json's) with the rank of the lora_A ([r, in]) and lora_B ([out, r])
// tensors of dir/adapter_model.safetensors, read from its header alone: when they all have one rank and it is
// not r, the error matches ErrRankMismatch and names both. Weights that cannot be read, or of several ranks,
// are left to LoadAdapter's full match, which names what is wrong with them.
func CheckWeightsRank(dir string, r int) error {
	path := filepath.Join(dir, AdapterWeightsName)
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		return nil
	}
	defer ck.Close()
	rank, n := -1, 0
	var names []string
	for _, ti := range ck.Infos() {
		k := -1
		switch {
		case strings.HasSuffix(ti.Name, ".lora_A.weight") && len(ti.Shape) == 2:
			k = ti.Shape[0]
		case strings.HasSuffix(ti.Name, ".lora_B.weight") && len(ti.Shape) == 2:
			k = ti.Shape[1]
		default:
			continue
		}
		if rank >= 0 && k != rank {
			return nil
		}
		rank, n = k, n+1
		names = append(names, ti.Name)
	}
	if n == 0 || rank == r {
		return nil
	}
	sort.Strings(names)
	cfgPath := filepath.Join(dir, AdapterConfigName)
	return rankError{fmt.Sprintf("lora: %s says r = %d but %s holds rank-%d lora_A/lora_B weights (%s): the config's r "+
		"disagrees with the weights' rank; set \"r\": %d in %s, or use the adapter_config.json saved with these weights",
		cfgPath, r, path, rank, firstFew(names, ", "), rank, cfgPath)}
}

// adapterWeights returns dir/adapter_model.safetensors, or an error that says what the folder holds instead:
// a pickle adapter_model.bin (older PEFT, or safe_serialization=False), which tune does not read.
func adapterWeights(dir string) (string, error) {
	path := filepath.Join(dir, AdapterWeightsName)
	if _, serr := os.Stat(path); serr != nil {
		if _, berr := os.Stat(filepath.Join(dir, "adapter_model.bin")); berr == nil {
			return "", fmt.Errorf("lora: %s holds adapter_model.bin (a pickle) and no %s; tune reads safetensors only: re-save the "+
				"adapter with PEFT's save_pretrained(dir, safe_serialization=True), or convert it in Python with "+
				"safetensors.torch.save_file(torch.load(\"adapter_model.bin\"), \"adapter_model.safetensors\")", dir, AdapterWeightsName)
		}
		return "", errctx.Wrap("lora: reading the adapter", serr)
	}
	return path, nil
}

// loadWeights copies dir/adapter_model.safetensors into the parameters the adapter trains (see LoadAdapter).
func (m *Model) loadWeights(dir string) (err error) {
	path, err := adapterWeights(dir)
	if err != nil {
		return err
	}
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		return errctx.Wrap("lora: reading the adapter", err)
	}
	defer ck.Close()
	params := map[string]int{}
	list := m.NamedParameters()
	for i, np := range list {
		if m.trains(np.Name) {
			params[np.Name] = i
		}
	}
	var unexpected, missing, mismatched []string
	// The lora_A/lora_B tensors whose rank alone differs from the config's r, their ranks, and how many
	// lora_A/lora_B tensors fit: all of one other rank means adapter_config.json's r is wrong, not the base.
	var offRank []string
	ranks := map[int]bool{}
	fitting := 0
	found := map[string]bool{}
	type load struct {
		key string
		idx int
	}
	var loads []load
	for _, key := range ck.Names() {
		name, ok := memoryName(key)
		i, known := params[name]
		if !ok || !known {
			unexpected = append(unexpected, key)
			continue
		}
		found[name] = true
		info, _ := ck.Info(key)
		r, isLoRA := loraRank(key, info.Shape, list[i].Value.Shape)
		if want := list[i].Value.Shape; !slices.Equal(info.Shape, []int(want)) {
			mismatched = append(mismatched, fmt.Sprintf("%s has shape %v, the model's %s has %v", key, info.Shape, name, want))
			if isLoRA {
				offRank = append(offRank, fmt.Sprintf("%s %v", key, info.Shape))
				ranks[r] = true
			}
			continue
		}
		if isLoRA {
			fitting++
		}
		loads = append(loads, load{key, i})
	}
	var keptBiases []string
	for name := range params {
		switch {
		case found[name]:
		case strings.HasSuffix(name, "bias") && m.savedModule(name) == "":
			keptBiases = append(keptBiases, name)
		default:
			missing = append(missing, savedKey(name))
		}
	}
	sort.Strings(missing)
	sort.Strings(keptBiases)
	if len(offRank) > 0 && len(offRank) == len(mismatched) && len(ranks) == 1 && fitting == 0 && len(missing) == 0 && len(unexpected) == 0 {
		r := 0
		for k := range ranks {
			r = k
		}
		sort.Strings(offRank)
		cfgPath := filepath.Join(dir, AdapterConfigName)
		return rankError{fmt.Sprintf("lora: %s says r = %d but %s holds rank-%d lora_A/lora_B weights (%s): the config's r "+
			"disagrees with the weights' rank; set \"r\": %d in %s, or use the adapter_config.json saved with these weights",
			cfgPath, m.config.R, path, r, firstFew(offRank, ", "), r, cfgPath)}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("missing tensors: %s", firstFew(missing, ", ")))
	}
	if len(unexpected) > 0 {
		problems = append(problems, fmt.Sprintf("tensors this adapter does not train: %s", firstFew(unexpected, ", ")))
	}
	if len(mismatched) > 0 {
		problems = append(problems, "mis-shaped tensors: "+firstFew(mismatched, "; "))
	}
	if len(problems) > 0 {
		// Bad input (exit 2 in the CLI), as a rank mismatch is: the files, not the run, must change (tester 13).
		return badinput.Mark(fmt.Errorf("lora: %s does not fit this model and adapter config (was it trained on another base model?): %w",
			path, errors.New(strings.Join(problems, "; "))))
	}
	for _, l := range loads {
		ht, err := ck.Get(l.key)
		if err != nil {
			return errctx.Wrapf(err, "lora: reading %s from %s", l.key, path)
		}
		vals, err := ht.Float32()
		if err != nil {
			return errctx.Wrapf(err, "lora: %s in %s", l.key, path)
		}
		if err := m.Backend().Upload(list[l.idx].Value, vals); err != nil {
			return errctx.Wrapf(err, "lora: loading %s", l.key)
		}
	}
	if len(keptBiases) > 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("%s has no value for the trained biases %s; the base model's values are kept",
			path, strings.Join(keptBiases, ", ")))
	}
	m.WeightsUpdated()
	return nil
}

// SavedLabels returns the label names (id2label, in id order) of the config.json that Save writes beside the
// adapter, or nil when dir has no config.json (an adapter PEFT wrote). Load the base model with these labels
// before LoadAdapter (transformer.LoadOptions.Labels), so that predictions and evaluation use the names the run
// trained with.
func SavedLabels(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, loaders.ConfigName)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	c, err := loaders.ReadBertConfig(dir)
	if err != nil {
		return nil, errctx.Wrap("lora: the config saved with the adapter", err)
	}
	names := make([]string, c.NumLabels())
	for i := range names {
		names[i] = c.ID2Label[i]
	}
	return names, nil
}

// SavedNumLabels returns num_labels of the classification head the adapter in dir saved (the row count of
// base_model.model.classifier.weight), or 0 when it saved none. Load the base model with that many labels
// before LoadAdapter (transformer.LoadOptions.NumLabels), as PEFT users pass num_labels to from_pretrained.
func SavedNumLabels(dir string) (int, error) {
	path, err := adapterWeights(dir)
	if err != nil {
		return 0, err
	}
	ck, err := loaders.OpenCheckpoint(path)
	if err != nil {
		return 0, errctx.Wrap("lora: reading the adapter", err)
	}
	defer ck.Close()
	if info, ok := ck.Info(keyPrefix + "classifier.weight"); ok && len(info.Shape) == 2 {
		return info.Shape[0], nil
	}
	return 0, nil
}

// loraRank returns the rank a lora_A ([r, in]) or lora_B ([out, r]) tensor of the file has, and whether key is
// one whose other dimension fits the model's tensor (want), so that only the rank can differ.
func loraRank(key string, shape []int, want []int) (int, bool) {
	if len(shape) != 2 || len(want) != 2 {
		return 0, false
	}
	switch {
	case strings.HasSuffix(key, ".lora_A.weight") && shape[1] == want[1]:
		return shape[0], true
	case strings.HasSuffix(key, ".lora_B.weight") && shape[0] == want[0]:
		return shape[1], true
	}
	return 0, false
}

// firstFew joins the first two items of list with sep and counts the rest: "a, b and 6 more (8 in all)".
func firstFew(list []string, sep string) string {
	const shown = 2
	if len(list) <= shown {
		return strings.Join(list, sep)
	}
	return fmt.Sprintf("%s and %d more (%d in all)", strings.Join(list[:shown], sep), len(list)-shown, len(list))
}

// ErrRankMismatch matches (errors.Is) LoadAdapter's error for an adapter_config.json whose r disagrees with the
// rank of every lora_A/lora_B in the adapter's weights: the adapter directory's two files do not belong
// together, which the CLI reports as bad input (exit 2).
var ErrRankMismatch = errors.New("lora: adapter_config.json's r disagrees with the weights' rank")

// rankError is LoadAdapter's rank-mismatch error: its own message, matching ErrRankMismatch.
type rankError struct{ msg string }

func (e rankError) Error() string        { return e.msg }
func (e rankError) Is(target error) bool { return target == ErrRankMismatch }
