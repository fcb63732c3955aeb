package transformer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// ConfigName is the configuration file of a Hugging Face checkpoint directory.
const ConfigName = "config.json"

// Save writes the model as transformers' save_pretrained does: config.json and model.safetensors (every
// parameter in F32 under its Hugging Face name, metadata {"format":"pt"}), so that
// BertForSequenceClassification.from_pretrained(dir) loads it with no missing or unexpected keys. dir is created
// if needed; each file is written to a temporary file and renamed into place.
func (m *BertForSequenceClassification) Save(dir string) (err error) {
	defer recoverError(&err)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("transformer: save: %w", err)
	}
	list := m.namedParameters()
	hosts := make([]loaders.HostTensor, 0, len(list))
	for _, np := range list {
		v := np.Param.Value
		vals := make([]float32, v.Numel())
		if err := m.b.Download(vals, v); err != nil {
			return fmt.Errorf("transformer: save: reading %s: %w", np.Name, err)
		}
		ht, err := loaders.NewHostTensor(np.Name, tensor.F32, v.Shape, vals)
		if err != nil {
			return fmt.Errorf("transformer: save: %w", err)
		}
		hosts = append(hosts, ht)
	}
	if err := loaders.WriteSafetensors(filepath.Join(dir, loaders.SafetensorsWeightsName), hosts, nil); err != nil {
		return fmt.Errorf("transformer: save: %w", err)
	}
	data, err := m.Config.MarshalHF()
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ConfigName), data)
}

// Load reads back into the model's parameters what Save wrote in dir (trainer.Loader): every parameter must be
// present under its name with its shape; other tensors are an error, since the file is expected to come from
// this model. The weight-cast cache is invalidated.
func (m *BertForSequenceClassification) Load(dir string) (err error) {
	defer recoverError(&err)
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		return fmt.Errorf("transformer: load: %w", err)
	}
	defer ck.Close()
	list := m.namedParameters()
	want := make(map[string]bool, len(list))
	for _, np := range list {
		want[np.Name] = true
	}
	var unexpected []string
	for _, n := range ck.Names() {
		if !want[n] {
			unexpected = append(unexpected, n)
		}
	}
	if len(unexpected) > 0 {
		return fmt.Errorf("transformer: load %s: tensors this model does not have: %v", ck.Path, unexpected)
	}
	for _, np := range list {
		if err := m.loadParam(ck, np.Name, np); err != nil {
			return fmt.Errorf("transformer: load %s: %w", ck.Path, err)
		}
	}
	m.WeightsUpdated()
	return nil
}

// loadParam copies checkpoint tensor src into the parameter np, checking its shape.
func (m *BertForSequenceClassification) loadParam(ck *loaders.Checkpoint, src string, np NamedParameter) error {
	ht, err := ck.Get(src)
	if err != nil {
		return fmt.Errorf("missing tensor %s: %w", src, err)
	}
	v := np.Param.Value
	if !slices.Equal(ht.Shape, []int(v.Shape)) {
		return fmt.Errorf("tensor %s has shape %v, the model's %s has %v", src, ht.Shape, np.Name, v.Shape)
	}
	vals, err := ht.Float32()
	if err != nil {
		return fmt.Errorf("tensor %s: %w", src, err)
	}
	return m.b.Upload(v, vals)
}

// writeFileAtomic writes data to a temporary file beside path and renames it over path.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("transformer: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("transformer: writing %s: %w", path, werr)
	}
	return nil
}
