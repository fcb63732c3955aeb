package bert

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tune-ml/tune/internal/errctx"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
	"github.com/tune-ml/tune/transformer"
)

// Save writes the model as transformers' save_pretrained does: config.json and model.safetensors (every
// parameter in F32 under its Hugging Face name, metadata {"format":"pt"}), so that
// BertForSequenceClassification.from_pretrained(dir) loads it with no missing or unexpected keys. dir is created
// if needed; each file is written to a temporary file and renamed into place.
func (m *BertForSequenceClassification) Save(dir string) (err error) {
	defer recoverError(&err)
	if err := transformer.SaveParams(m.Backend(), dir, m.namedParameters(), transformer.CheckpointRules{}, 0); err != nil {
		return errctx.Wrap("bert: save", err)
	}
	return m.SaveConfig(dir)
}

// SaveConfig writes dir/config.json alone, as transformers' PretrainedConfig.save_pretrained does: the config
// the model was loaded from (its unknown keys kept) updated with Config, id2label/label2id and num_labels
// included. Save calls it; a LoRA adapter directory holds it too (lora.Model.Save), so that the label names a
// run trained with travel with the adapter. dir must exist.
func (m *BertForSequenceClassification) SaveConfig(dir string) error {
	hf, err := m.Config.ToHF(m.hfBase)
	if err != nil {
		return err
	}
	if err := hf.WriteFile(filepath.Join(dir, loaders.ConfigName)); err != nil {
		return errctx.Wrap("transformer: save", err)
	}
	return nil
}

// Load reads back into the model's parameters what Save wrote in dir (trainer.Loader): every parameter must be
// present under its name with its shape; other tensors are an error, since the file is expected to come from
// this model. The weight-cast cache is invalidated.
func (m *BertForSequenceClassification) Load(dir string) (err error) {
	defer recoverError(&err)
	if err := transformer.ReloadParams("bert", m.Backend(), dir, m.namedParameters(), transformer.CheckpointRules{}); err != nil {
		return err
	}
	m.WeightsUpdated()
	return nil
}

// loadParam copies checkpoint tensor src into the parameter np, checking its shape.
func (m *BertForSequenceClassification) loadParam(ck *loaders.Checkpoint, src string, np transformer.NamedParameter) error {
	ht, err := ck.Get(src)
	if err != nil {
		return errctx.Wrapf(err, "missing tensor %s", src)
	}
	v := np.Param.Value
	if !slices.Equal(ht.Shape, []int(v.Shape)) {
		return fmt.Errorf("tensor %s has shape %v, the model's %s has %v", src, ht.Shape, np.Name, v.Shape)
	}
	vals, err := ht.Float32()
	if err != nil {
		return errctx.Wrapf(err, "tensor %s", src)
	}
	return m.Backend().Upload(v, vals)
}

// isHead reports whether a parameter belongs to the pooler or classifier, which a checkpoint of another head
// (BertModel, BertForMaskedLM, a different num_labels) may lack.
func isHead(name string) bool {
	return strings.HasPrefix(name, "classifier.") || strings.HasPrefix(name, "bert.pooler.")
}

// LoadPretrained builds a BertForSequenceClassification on b from a Hugging Face checkpoint directory:
// config.json (loaders.ReadBertConfig, with opts' label overrides) and model.safetensors or a sharded index.
// Checkpoint names are matched through loaders' BERT name table, so BertModel (no "bert." prefix),
// BertForMaskedLM/BertForPreTraining and legacy LayerNorm.gamma/beta checkpoints load; F16 and BF16 tensors are
// widened to the FP32 masters. A pooler or classifier the checkpoint lacks (or holds with another num_labels)
// is freshly initialised and listed in the report's Initialized (print Notice); any other missing or mis-shaped
// tensor is an error naming it, found from the safetensors headers before the model is allocated. Unexpected tensors are reported, not errors (transformers only warns).
func LoadPretrained(dir string, b tensor.Backend, opts transformer.LoadOptions) (m *BertForSequenceClassification, report *transformer.LoadReport, err error) {
	defer recoverError(&err)
	if err := transformer.CheckAttnImplementation(opts.AttnImplementation); err != nil {
		return nil, nil, fmt.Errorf("transformer: load %s: %w", dir, err)
	}
	hf, err := loaders.ReadBertConfig(dir)
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "transformer: load %s", dir)
	}
	switch {
	case opts.Labels != nil:
		err = hf.SetLabels(opts.Labels)
	case opts.NumLabels > 0 && opts.NumLabels != hf.NumLabels():
		err = hf.SetLabels(DefaultLabels(opts.NumLabels))
	}
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "transformer: load %s", dir)
	}
	if opts.ProblemType != "" {
		hf.ProblemType = opts.ProblemType
	}
	cfg, err := BertConfigFromHF(hf)
	if err != nil { // name the file: loaders parsed it, the values are what this package cannot build
		return nil, nil, &ConfigFileError{Path: filepath.Join(dir, loaders.ConfigName), Err: err}
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return nil, nil, errctx.Wrapf(err, "transformer: load %s", dir)
	}
	defer ck.Close()
	source, report, err := matchPretrained(dir, hf, ck)
	if err != nil {
		return nil, report, err
	}
	if m, err = newBert(b, cfg); err != nil {
		return nil, report, err
	}
	m.hfBase = hf
	if err := m.SetAttnImplementation(opts.AttnImplementation); err != nil {
		return nil, report, err
	}
	list := m.namedParameters()
	for i, np := range list {
		src, ok := source[np.Name]
		if !ok {
			if err := m.initParam(np, opts.Seed, uint64(i)); err != nil {
				return nil, report, err
			}
			report.Initialized = append(report.Initialized, np.Name)
			continue
		}
		if err := m.loadParam(ck, src, np); err != nil {
			return nil, report, errctx.Wrapf(err, "transformer: load %s", ck.Path)
		}
	}
	m.WeightsUpdated()
	return m, report, nil
}

// matchPretrained matches the checkpoint's tensors (names and shapes from the safetensors headers) against the
// shapes the config implies before anything is allocated, so a config.json that disagrees with its weights is
// an error naming the tensors, not a model built (or an allocation attempted) at the wrong size. A config with
// more layers than the checkpoint holds is refused first, so the list of expected tensors is never longer than
// the checkpoint's (num_hidden_layers 190000 beside two layers would otherwise list three million names). A
// pooler or classifier the checkpoint lacks or holds at another size is no error: LoadPretrained initialises it.
func matchPretrained(dir string, hf *loaders.BertConfig, ck *loaders.Checkpoint) (map[string]string, *transformer.LoadReport, error) {
	configPath := filepath.Join(dir, loaders.ConfigName)
	if err := transformer.CheckLayerCount(configPath, "num_hidden_layers", hf.NumHiddenLayers, ck, "bert.encoder.layer.", "encoder.layer."); err != nil {
		return nil, nil, fmt.Errorf("transformer: load %s: %w", dir, err)
	}
	source, lr := loaders.MapBertCheckpoint(loaders.BertSequenceClassificationTensors(hf), ck.Infos(), hf)
	report := &transformer.LoadReport{LoadReport: lr, Architecture: "BertForSequenceClassification"}
	var fatal []string
	for _, name := range lr.Missing {
		if !isHead(name) {
			fatal = append(fatal, name)
		}
	}
	for _, mm := range lr.Mismatched {
		if !isHead(mm.Name) {
			fatal = append(fatal, mm.String())
		}
	}
	for _, mm := range lr.WrongDType { // a head too: the file holds it, damaged, not another head
		fatal = append(fatal, mm.String())
	}
	if len(fatal) > 0 {
		summary, _, _ := strings.Cut(lr.String(), "\n")
		return nil, report, fmt.Errorf("%w\n(%s; the model's shapes come from %s)",
			errctx.Wrapf(lr.Err(), "transformer: load %s", ck.Path), summary, configPath)
	}
	return source, report, nil
}

// CheckPretrained matches the checkpoint ck with the config.json in dir (and its labels) as LoadPretrained does
// before it builds the model (transformer.Family.Check): the report, and LoadPretrained's error for weights the
// config does not describe. Only the headers are read.
func CheckPretrained(dir string, ck *loaders.Checkpoint) (*transformer.LoadReport, error) {
	hf, err := loaders.ReadBertConfig(dir)
	if err != nil {
		return nil, errctx.Wrapf(err, "transformer: load %s", dir)
	}
	if _, err := BertConfigFromHF(hf); err != nil {
		return nil, &ConfigFileError{Path: filepath.Join(dir, loaders.ConfigName), Err: err}
	}
	_, report, err := matchPretrained(dir, hf, ck)
	return report, err
}
