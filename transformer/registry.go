package transformer

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// Family is one model family in the registry: the config.json model_type values and architectures it builds,
// and its loader. A recipe names a checkpoint and nothing else; Open picks the family from its config.json.
type Family struct {
	// Name is the family's name in messages ("bert", "llama").
	Name string
	// ModelTypes are the config.json model_type values the family reads ("llama", "qwen2", ...).
	ModelTypes []string
	// Architectures are the transformers classes the family builds ("LlamaForCausalLM"); a checkpoint whose
	// architectures name another class of the same model_type (BertModel, LlamaModel) still loads, its head
	// handled by the family's loader.
	Architectures []string
	// Load builds the model on b from the checkpoint directory dir (config.json and safetensors weights).
	Load func(dir string, b tensor.Backend, opts LoadOptions) (Adaptable, *LoadReport, error)
	// ProjectionPaths returns the module paths of the model's projections, in model order, as ModelCore's
	// Projections would list them once the model is built (what LoRA's target_modules are matched against),
	// read from the config.json in dir alone: nothing is allocated and no weight is read.
	ProjectionPaths func(dir string) ([]string, error)
	// Check matches the checkpoint ck with the config.json in dir as Load does before it builds the model,
	// from the safetensors headers alone: the report, and the error Load would return for weights the config
	// does not describe. What it lists is bounded by the checkpoint's tensors, never by the config's sizes.
	Check func(dir string, ck *loaders.Checkpoint) (*LoadReport, error)
	// Skeleton builds, on b, the model the config.json in dir describes without reading a weight (its values
	// are what the family's internal builder leaves: on the meta backend, nothing): the parameter list and the
	// projections with their sizes, for the checks a recipe makes before loading.
	Skeleton func(dir string, b tensor.Backend) (Adaptable, error)
}

// Loader adapts a family's LoadPretrained, which returns its own model type, to Family.Load: on error the
// Adaptable is nil (not an interface holding a nil *M).
func Loader[M Adaptable](load func(dir string, b tensor.Backend, opts LoadOptions) (M, *LoadReport, error)) func(string, tensor.Backend, LoadOptions) (Adaptable, *LoadReport, error) {
	return func(dir string, b tensor.Backend, opts LoadOptions) (Adaptable, *LoadReport, error) {
		m, r, err := load(dir, b, opts)
		if err != nil {
			return nil, r, err
		}
		return m, r, nil
	}
}

var registry = struct {
	sync.Mutex
	byType map[string]*Family
}{byType: map[string]*Family{}}

// Register adds a family to the registry (from the family package's init). A model_type registered twice
// panics: that is a programming error.
func Register(f Family) {
	registry.Lock()
	defer registry.Unlock()
	for _, t := range f.ModelTypes {
		if _, dup := registry.byType[t]; dup {
			panic("transformer: model_type " + t + " registered twice")
		}
		registry.byType[t] = &f
	}
}

// ModelTypes returns every registered model_type, sorted.
func ModelTypes() []string {
	registry.Lock()
	defer registry.Unlock()
	return modelTypesLocked()
}

// MaxConfigLayers bounds the layer count of a config.json read without weights beside it, before anything is
// listed by it: the deepest Transformer trained (DeepNet, Wang et al. 2022) has 1,000 layers, BERT-large 24,
// Llama 3.1 405B 126. With weights, the checkpoint bounds it (CheckLayerCount).
const MaxConfigLayers = 1000

// checkConfigLayers refuses a config.json in dir whose num_hidden_layers (n_layer for GPT-2) exceeds
// MaxConfigLayers: 10000000 layers took tune validate to 2.5 GB listing the projections, and out of memory
// building them on the meta backend.
func checkConfigLayers(dir string) error {
	path := filepath.Join(dir, loaders.ConfigName)
	data, err := smallfile.Read(path)
	if err != nil {
		return fmt.Errorf("transformer: %w", err)
	}
	var c struct {
		NumHiddenLayers *float64 `json:"num_hidden_layers"`
		NLayer          *float64 `json:"n_layer"`
	}
	if json.Unmarshal(data, &c) != nil {
		return nil // the family's reader names what is wrong with the file
	}
	for _, l := range []struct {
		key string
		n   *float64
	}{{"num_hidden_layers", c.NumHiddenLayers}, {"n_layer", c.NLayer}} {
		if l.n != nil && *l.n > MaxConfigLayers {
			return fmt.Errorf("transformer: %s: %s %.0f is more than %d, and %s holds no weights to check it against: "+
				"the deepest Transformer trained (DeepNet, Wang et al. 2022) has 1,000 layers", path, l.key, *l.n,
				MaxConfigLayers, dir)
		}
	}
	return nil
}

// modelKind is the part of config.json that picks the family.
type modelKind struct {
	ModelType     string   `json:"model_type"`
	Architectures []string `json:"architectures"`
}

// Lookup returns the family that builds the checkpoint in dir, read from its config.json's model_type (and,
// when model_type is absent, its architectures). An unknown model_type is an error naming the file, the value
// and the supported ones.
func Lookup(dir string) (*Family, error) {
	path := filepath.Join(dir, loaders.ConfigName)
	data, err := smallfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("transformer: %w", err)
	}
	var k modelKind
	if err := json.Unmarshal(data, &k); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("transformer: %s: invalid JSON: %w", path, loaders.DescribeJSONError(data, err))
		}
		return nil, fmt.Errorf("transformer: %s: %w", path, loaders.DescribeJSONError(data, err))
	}
	registry.Lock()
	defer registry.Unlock()
	if k.ModelType == "" {
		for _, f := range registry.byType {
			for _, a := range k.Architectures {
				if slices.Contains(f.Architectures, a) {
					return f, nil
				}
			}
		}
		if len(k.Architectures) == 0 { // configs written before model_type existed are BERT's
			if f, ok := registry.byType["bert"]; ok {
				return f, nil
			}
		}
		return nil, fmt.Errorf("transformer: %s has no model_type and its architectures %v name no class tune builds; tune builds model_type %s",
			path, k.Architectures, strings.Join(modelTypesLocked(), ", "))
	}
	f, ok := registry.byType[k.ModelType]
	if !ok {
		return nil, fmt.Errorf("transformer: %s: model_type %q is not supported; tune builds model_type %s",
			path, k.ModelType, strings.Join(modelTypesLocked(), ", "))
	}
	return f, nil
}

func modelTypesLocked() []string {
	var ts []string
	for t := range registry.byType {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

// ProjectionPaths returns the module paths of the projections of the model the checkpoint in dir builds
// (Lookup), from its config.json alone, so that a LoRA target_modules that names no module can be refused
// before the weights load. The weights in dir are first matched with the config (checkFirst), so the list is
// bounded by the checkpoint, not by the config's num_hidden_layers (by MaxConfigLayers without weights).
func ProjectionPaths(dir string) ([]string, error) {
	f, err := checkFirst(dir)
	if err != nil {
		return nil, err
	}
	if f.ProjectionPaths == nil {
		return nil, fmt.Errorf("transformer: the %s family cannot list its modules without loading the model", f.Name)
	}
	return f.ProjectionPaths(dir)
}

// Skeleton builds on b (the meta backend: nothing allocated) the model the checkpoint in dir describes, from
// its config.json, no weight read (Family.Skeleton), after checkFirst has matched the weights, if any, with the
// config: what a recipe measures before loading (the sizes of the projections LoRA adapts).
func Skeleton(dir string, b tensor.Backend) (Adaptable, error) {
	f, err := checkFirst(dir)
	if err != nil {
		return nil, err
	}
	if f.Skeleton == nil {
		return nil, fmt.Errorf("transformer: the %s family cannot build a model without loading it", f.Name)
	}
	return f.Skeleton(dir, b)
}

// checkFirst returns the family of the checkpoint in dir (Lookup) after matching its weights, when dir holds
// any, with its config.json (Family.Check): a config that describes more layers than the weights hold is
// refused from the headers before anything is listed by its sizes (num_hidden_layers 10000000 beside two
// layers made tune validate run out of memory listing the projections). A directory without weights (or
// with unreadable ones) is the config alone, its layer count bounded by MaxConfigLayers (checkConfigLayers).
func checkFirst(dir string) (*Family, error) {
	f, err := Lookup(dir)
	if err != nil {
		return nil, err
	}
	ck, err := loaders.OpenCheckpoint(dir)
	if err != nil || f.Check == nil {
		// No weights to bound the config by (a config-only download), or unreadable ones, which the load
		// names: the config alone, its layer count bounded.
		if ck != nil {
			ck.Close()
		}
		return f, checkConfigLayers(dir)
	}
	defer ck.Close()
	if _, err := f.Check(dir, ck); err != nil {
		return nil, err
	}
	return f, nil
}

// Check matches the checkpoint ck with the config.json in dir without loading it (Family.Check of the family
// Lookup names), as tune inspect shows it: the report and the error a load would return.
func Check(dir string, ck *loaders.Checkpoint) (*LoadReport, error) {
	f, err := Lookup(dir)
	if err != nil {
		return nil, err
	}
	if f.Check == nil {
		return nil, fmt.Errorf("transformer: the %s family cannot check a checkpoint without loading it", f.Name)
	}
	return f.Check(dir, ck)
}

// Open loads the checkpoint in dir with the family its config.json names (Lookup), as transformers'
// AutoModel.from_pretrained does. The families register themselves when their package is imported (BERT's is
// this package; the causal LMs are in transformer/llama).
func Open(dir string, b tensor.Backend, opts LoadOptions) (Adaptable, *LoadReport, error) {
	f, err := Lookup(dir)
	if err != nil {
		return nil, nil, err
	}
	return f.Load(dir, b, opts)
}
