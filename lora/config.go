package lora

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tune-ml/tune/internal/typo"
)

// Bias values: which biases are trained besides the adapters (PEFT's bias field).
const (
	BiasNone     = "none"      // no bias is trained
	BiasAll      = "all"       // every bias of the model is trained and saved with the adapter
	BiasLoRAOnly = "lora_only" // only the biases of the targeted Linears are trained and saved
)

// Task types tune knows, as PEFT's TaskType spells them. tune's models are sequence classifiers (SEQ_CLS).
const (
	TaskSeqCls = "SEQ_CLS"
)

var (
	biasValues = []string{BiasNone, BiasAll, BiasLoRAOnly}
	// taskTypes are PEFT's TaskType values; Validate accepts them all so that an adapter_config.json written by
	// PEFT for another task reads, and the trainer decides what it can train.
	taskTypes = []string{"", TaskSeqCls, "TOKEN_CLS", "FEATURE_EXTRACTION", "QUESTION_ANS", "CAUSAL_LM", "SEQ_2_SEQ_LM"}
)

// SeqClsHeadNames are the names PEFT gives a sequence-classification head (SEQ_CLS_HEAD_NAMES): task_type SEQ_CLS
// adds them to modules_to_save, and "all-linear" never targets them.
var SeqClsHeadNames = []string{"classifier", "score"}

// DefaultTargetModules is what target_modules means when it is not set, for BERT (PEFT's
// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["bert"]).
var DefaultTargetModules = []string{"query", "value"}

// DefaultTargetModulesByType is PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for the model types
// tune builds (peft/utils/constants.py): Apply fills an unset target_modules from it by the base model's
// config.json model_type, as get_peft_model does, so the saved adapter_config.json names the modules.
var DefaultTargetModulesByType = map[string][]string{
	"bert":    {"query", "value"},
	"llama":   {"q_proj", "v_proj"},
	"mistral": {"q_proj", "v_proj"},
	"qwen2":   {"q_proj", "v_proj"},
	"qwen3":   {"q_proj", "v_proj"},
	"gpt2":    {"c_attn"},
}

// FanInFanOutWarning is PEFT's message when fan_in_fan_out is set on a plain Linear (PEFT's merge and unmerge, peft/tuners/lora/layer.py); Normalize
// returns it and resets the field.
const FanInFanOutWarning = "fan_in_fan_out is set to True but the target module is `torch.nn.Linear`. " +
	"Setting fan_in_fan_out to False."

// Config holds PEFT's LoraConfig fields that tune implements, with PEFT 0.21's names and defaults (peft/tuners/lora/config.py).
// The yaml keys are a recipe's lora: section; adapter_config.json is written by WriteAdapterConfig.
type Config struct {
	// R is the adapter rank r: A is (r, in) and B is (out, r). Default 8.
	R int `yaml:"r" json:"r"`
	// LoraAlpha scales the adapter's output: scaling = lora_alpha / r (or / √r with UseRSLoRA). Default 8; a
	// common choice is 2·r.
	LoraAlpha float64 `yaml:"lora_alpha" json:"lora_alpha"`
	// LoraDropout is the dropout probability applied to the adapter branch's input only, in [0, 1). Default 0.
	LoraDropout float64 `yaml:"lora_dropout" json:"lora_dropout"`
	// TargetModules chooses the Linear modules that get an adapter: a list of names, a regex, or "all-linear".
	// Unset means DefaultTargetModules. See TargetModules.
	TargetModules TargetModules `yaml:"target_modules" json:"target_modules"`
	// ModulesToSave lists modules trained in full and saved with the adapter (e.g. "classifier"), matched like a
	// target_modules list (exact path or "."+name suffix).
	ModulesToSave []string `yaml:"modules_to_save" json:"modules_to_save"`
	// Bias says which biases are trained: none (default), all, or lora_only.
	Bias string `yaml:"bias" json:"bias"`
	// UseRSLoRA uses rank-stabilised scaling lora_alpha/√r instead of lora_alpha/r. Default false.
	UseRSLoRA bool `yaml:"use_rslora" json:"use_rslora"`
	// InitLoraWeights chooses the initialisation of A and B. Default true (A Kaiming-uniform, B zero).
	InitLoraWeights InitLoraWeights `yaml:"init_lora_weights" json:"init_lora_weights"`
	// FanInFanOut says the base layer stores its weight as (in, out) (GPT-2's Conv1D). BERT's Linears store
	// (out, in), so Normalize resets it to false with PEFT's warning.
	FanInFanOut bool `yaml:"fan_in_fan_out" json:"fan_in_fan_out"`
	// TaskType is PEFT's task_type; SEQ_CLS adds the classification head to modules_to_save (Normalize).
	TaskType string `yaml:"task_type" json:"task_type"`
}

// DefaultConfig returns PEFT 0.21's LoraConfig defaults: r 8, lora_alpha 8, lora_dropout 0, bias none,
// init_lora_weights true, target_modules unset (DefaultTargetModules), no task type.
func DefaultConfig() Config {
	return Config{R: 8, LoraAlpha: 8, Bias: BiasNone, InitLoraWeights: InitDefault}
}

// Scaling returns the factor applied to the adapter's output: lora_alpha/r, or lora_alpha/√r with use_rslora
// (PEFT's LoraLayer.update_layer; peft/tuners/lora/layer.py: alpha 16, r 8 → 2.0; rslora alpha 16, r 16 → 4.0).
func (c *Config) Scaling() float64 {
	if c.UseRSLoRA {
		return c.LoraAlpha / math.Sqrt(float64(c.R))
	}
	return c.LoraAlpha / float64(c.R)
}

// Targets returns the effective target_modules: TargetModules, or DefaultTargetModules when it is unset.
func (c *Config) Targets() TargetModules {
	if !c.TargetModules.IsSet() {
		return TargetModules{Names: slices.Clone(DefaultTargetModules)}
	}
	return c.TargetModules
}

// Saves reports whether path (a full module path such as "classifier") is one of modules_to_save: equal to an
// entry or ending in "." + entry, as PEFT matches them.
func (c *Config) Saves(path string) bool {
	return slices.ContainsFunc(c.ModulesToSave, func(m string) bool { return matchesName(path, m) })
}

// Matches reports whether the Linear module at path (its full name, e.g.
// "bert.encoder.layer.0.attention.self.query") gets an adapter, as PEFT's check_target_module_exists decides
// (PEFT's target_modules matching, check_target_module_exists in peft/tuners/tuners_utils.py):
//   - a list matches a path equal to an entry or ending in "." + entry ("dense" also hits "bert.pooler.dense");
//   - a single string is a regular expression that must match the whole path (Python's re.fullmatch);
//   - "all-linear" matches every Linear except the classification head (SeqClsHeadNames).
//
// A module in modules_to_save is trained whole and never gets an adapter. Paths must be those of Linear
// modules; an invalid regex matches nothing (Validate reports it).
func (c *Config) Matches(path string) bool {
	if c.Saves(path) {
		return false
	}
	t := c.Targets()
	switch {
	case t.IsAllLinear():
		leaf := path[strings.LastIndexByte(path, '.')+1:]
		return !slices.Contains(SeqClsHeadNames, leaf)
	case t.Regex != "":
		re, err := t.compile()
		return err == nil && re.MatchString(path)
	}
	return slices.ContainsFunc(t.Names, func(n string) bool { return matchesName(path, n) })
}

// ErrNoTargets is wrapped by Select's error when target_modules matches none of the model's Linears.
var ErrNoTargets = errors.New("no modules were targeted")

// Select returns the paths among linearPaths (the full names of a model's Linear modules, in model order) that
// Matches accepts, in the same order. It errors, wrapping ErrNoTargets, when none matches: PEFT refuses such a
// config too, and a single string that is meant as a name ("query") is the usual cause.
func (c *Config) Select(linearPaths []string) ([]string, error) {
	var out []string
	for _, p := range linearPaths {
		if c.Matches(p) {
			out = append(out, p)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	t := c.Targets()
	hint := ""
	if t.Regex != "" && !t.IsAllLinear() {
		hint = fmt.Sprintf("; a single string is a regex that must match a whole path such as %q: write a list "+
			"([%s]) to match by name, or a pattern like '.*\\.%s'", firstOr(linearPaths, "bert.encoder.layer.0.attention.self.query"),
			t.Regex, t.Regex)
	}
	if t.Regex == "" {
		hint = namesHint(t.Names, linearPaths)
	}
	return nil, fmt.Errorf("lora: %w: target_modules %s matched none of the model's %d Linear modules%s",
		ErrNoTargets, t, len(linearPaths), hint)
}

// CheckTargets checks target_modules against linearPaths (the model's Linear module paths, which
// transformer.ProjectionPaths reads from config.json before any weight loads), with Select's rules, and is
// stricter than PEFT in one way: every name of a list must match some module. PEFT refuses a config that
// matches nothing but drops an entry that matches nothing in silence, so [query, vlaue] trains query alone; a
// name no module has is a typo, and the error names it with the model's module names and the closest one. The
// error wraps ErrNoTargets and carries no package prefix, for the caller to prefix with its key.
func (c *Config) CheckTargets(linearPaths []string) error {
	t := c.Targets()
	if _, err := c.Select(linearPaths); err != nil {
		return targetsError{strings.TrimPrefix(err.Error(), "lora: "+ErrNoTargets.Error()+": target_modules ")}
	}
	if t.Regex != "" || t.IsAllLinear() {
		return nil
	}
	var unmatched []string
	for _, n := range t.Names {
		if !slices.ContainsFunc(linearPaths, func(p string) bool { return matchesName(p, n) }) {
			unmatched = append(unmatched, strconv.Quote(n))
		}
	}
	if len(unmatched) == 0 {
		return nil
	}
	verb := "matches"
	if len(unmatched) > 1 {
		verb = "match"
	}
	names := make([]string, len(unmatched))
	for i, q := range unmatched {
		names[i], _ = strconv.Unquote(q)
	}
	return targetsError{fmt.Sprintf("%s in %s %s none of the model's %d Linear modules%s", strings.Join(unmatched, ", "), t,
		verb, len(linearPaths), namesHint(names, linearPaths))}
}

// targetsError is CheckTargets' error: its own message, matching ErrNoTargets.
type targetsError struct{ msg string }

func (e targetsError) Error() string        { return e.msg }
func (e targetsError) Is(target error) bool { return target == ErrNoTargets }

// namesHint lists the module names a target_modules list can use (the last parts of the model's Linear
// paths), with the closest one (at most two edits away) to each entry, for a list that matched nothing.
func namesHint(entries, linearPaths []string) string {
	var names []string
	for _, p := range linearPaths {
		parts := strings.Split(p, ".")
		leaf := parts[len(parts)-1]
		if !slices.Contains(names, leaf) {
			names = append(names, leaf)
		}
	}
	var fixes []string
	for _, e := range entries {
		best, bestD := "", 3 // at most two edits away
		for _, n := range names {
			if d := typo.Distance(e, n); d < bestD {
				best, bestD = n, d
			}
		}
		if best != "" {
			fixes = append(fixes, fmt.Sprintf("%q → %q", e, best))
		}
	}
	example := "attention.output.dense"
	if len(linearPaths) > 0 && !slices.ContainsFunc(linearPaths, func(p string) bool { return strings.HasSuffix(p, "."+example) }) {
		parts := strings.Split(linearPaths[0], ".")
		example = strings.Join(parts[max(len(parts)-2, 0):], ".")
	}
	hint := "; the model's Linear modules are named " + strings.Join(names, ", ") +
		" (a name matches every module whose path ends in it; a dotted suffix such as " + example + " narrows the match)"
	if len(fixes) > 0 {
		hint += "; did you mean " + strings.Join(fixes, ", ") + "?"
	}
	return hint
}

// ErrInvalidConfig is wrapped by every *ConfigError.
var ErrInvalidConfig = errors.New("invalid LoRA config")

// ConfigError reports one Config field whose value is not allowed; Key is the PEFT name ("lora_alpha").
type ConfigError struct {
	Key    string // the PEFT field name: "r", "lora_alpha", "target_modules"
	Reason string // what is wrong, with the value given: "must be > 0 (got 0)"
}

// Error formats as "lora: r: must be > 0 (got 0)".
func (e *ConfigError) Error() string { return "lora: " + e.Key + ": " + e.Reason }

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Validate checks every field and returns nil or the errors.Join of one *ConfigError per bad field: r > 0,
// lora_alpha finite and > 0 with a scaling (Scaling) inside FP32's normal range, lora_dropout in [0, 1), bias and init_lora_weights among the supported values,
// target_modules a valid list or a regex Go can compile (RE2: no look-around or back-references).
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, v ...any) {
		errs = append(errs, &ConfigError{Key: key, Reason: fmt.Sprintf(format, v...)})
	}
	if c.R <= 0 {
		bad("r", "must be > 0 (got %d)", c.R)
	}
	alphaOK := !math.IsNaN(c.LoraAlpha) && !math.IsInf(c.LoraAlpha, 0) && c.LoraAlpha > 0
	if !alphaOK {
		bad("lora_alpha", "must be finite and > 0; it is usually 2·r (got %v)", c.LoraAlpha)
	}
	if s := c.Scaling(); alphaOK && c.R > 0 && !(s >= minScaling && s <= math.MaxFloat32) {
		rule := "lora_alpha/r"
		if c.UseRSLoRA {
			rule = "lora_alpha/√r (use_rslora)"
		}
		bad("lora_alpha", "%v with r %d makes the scaling %s = %.3g, outside FP32's range (%.2g to %.2g): every adapter's "+
			"output and gradients are multiplied by it in FP32, where it would be %s; lora_alpha is usually r or 2·r "+
			"(scaling 1 or 2)", c.LoraAlpha, c.R, rule, s, minScaling, math.MaxFloat32, scalingFate(s))
	}
	if !(c.LoraDropout >= 0 && c.LoraDropout < 1) {
		bad("lora_dropout", "must be in [0, 1) (got %v)", c.LoraDropout)
	}
	if !slices.Contains(biasValues, c.Bias) {
		bad("bias", "must be one of none, all, lora_only (got %q)", c.Bias)
	}
	if err := c.InitLoraWeights.validate(); err != nil {
		bad("init_lora_weights", "%v", err)
	}
	if !slices.Contains(taskTypes, c.TaskType) {
		bad("task_type", "must be one of %s or empty (got %q)", strings.Join(taskTypes[1:], ", "), c.TaskType)
	}
	if err := c.TargetModules.validate(); err != nil {
		bad("target_modules", "%v", err)
	}
	for _, m := range c.ModulesToSave {
		if strings.TrimSpace(m) == "" {
			bad("modules_to_save", "holds an empty name")
		}
	}
	return errors.Join(errs...)
}

// minScaling is the smallest scaling Validate accepts: FP32's smallest normal number (2^-126). Below it the
// factor is subnormal in FP32, which GPUs flush to zero.
const minScaling = 0x1p-126

// scalingFate says what an out-of-range scaling becomes in FP32, for Validate's message.
func scalingFate(s float64) string {
	if s > 1 {
		return "+Inf (the first step's adapter output is Inf·0 = NaN, B starting at zero)"
	}
	return "0 (the adapters would never change the model)"
}

// FanInFanOutConv1DWarning is PEFT's message when fan_in_fan_out is false but the target modules are
// transformers' Conv1D (GPT-2's projections); NormalizeFor(true) returns it and sets the field.
const FanInFanOutConv1DWarning = "fan_in_fan_out is set to False but the target module is `Conv1D`. " +
	"Setting fan_in_fan_out to True."

// Normalize applies the adjustments PEFT makes when it wraps a model whose targets are nn.Linear modules, and
// returns the warnings to show:
//   - fan_in_fan_out is reset to false, with PEFT's warning (FanInFanOutWarning): every Linear tune targets
//     stores its weight as (out, in) (PEFT's merge and unmerge, peft/tuners/lora/layer.py);
//   - with task_type SEQ_CLS, "classifier" and "score" are added to modules_to_save, so the newly initialised
//     head is trained and saved with the adapter (the classifier saved with the adapter, modules_to_save in peft/utils/save_and_load.py).
func (c *Config) Normalize() []string { return c.NormalizeFor(false) }

// NormalizeFor is Normalize for a model whose targets are Conv1D modules when conv1D is set (GPT-2, see
// Apply): then fan_in_fan_out is set to true instead, with PEFT's FanInFanOutConv1DWarning when it was false
// (peft/tuners/lora/layer.py dispatch_default).
func (c *Config) NormalizeFor(conv1D bool) []string {
	var warnings []string
	switch {
	case conv1D && !c.FanInFanOut:
		c.FanInFanOut = true
		warnings = append(warnings, FanInFanOutConv1DWarning)
	case !conv1D && c.FanInFanOut:
		c.FanInFanOut = false
		warnings = append(warnings, FanInFanOutWarning)
	}
	if c.TaskType == TaskSeqCls {
		for _, h := range SeqClsHeadNames {
			if !slices.Contains(c.ModulesToSave, h) {
				c.ModulesToSave = append(c.ModulesToSave, h)
			}
		}
	}
	return warnings
}

// matchesName is PEFT's list rule: path equals name or ends with "." + name.
func matchesName(path, name string) bool {
	return path == name || strings.HasSuffix(path, "."+name)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// compileFullMatch compiles pattern so that it must match a whole string, like Python's re.fullmatch.
func compileFullMatch(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// AllLinear is the target_modules shorthand for every Linear except the classification head.
const AllLinear = "all-linear"

// TargetModules is PEFT's target_modules, which is either a list or a single string, and the two follow
// different rules (PEFT's target_modules matching, check_target_module_exists in peft/tuners/tuners_utils.py):
//   - Names (a YAML/JSON list): a module is targeted when its full path equals a name or ends in "." + name;
//   - Regex (a YAML/JSON string): a regular expression that must match the whole path (re.fullmatch), or the
//     shorthand AllLinear.
//
// At most one is set; neither means "unset" (Config.Targets then uses DefaultTargetModules). A YAML scalar stays
// one string: "all-linear" is never split into characters.
type TargetModules struct {
	Names []string // module names matched exactly or as a "."+name suffix of the path; nil when unset
	Regex string   // a regex matched against the whole path, or "all-linear"; "" when unset
}

// IsSet reports whether target_modules was given (an empty list counts as given, and targets nothing).
func (t TargetModules) IsSet() bool { return t.Names != nil || t.Regex != "" }

// IsAllLinear reports whether t is the "all-linear" shorthand.
func (t TargetModules) IsAllLinear() bool { return t.Names == nil && t.Regex == AllLinear }

// String formats t as a recipe would write it: [query, value], 'regex' or unset.
func (t TargetModules) String() string {
	switch {
	case t.Names != nil:
		return "[" + strings.Join(t.Names, ", ") + "]"
	case t.Regex != "":
		return strconv.Quote(t.Regex)
	}
	return "unset"
}

// UnmarshalYAML reads a sequence of strings as Names and a scalar string as Regex (never splitting it); a null
// leaves t unset. Anything else is an error naming the line.
func (t *TargetModules) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			*t = TargetModules{}
			return nil
		}
		if n.ShortTag() != "!!str" {
			return fmt.Errorf("line %d: target_modules must be a list of names or one regex string, got %s %q",
				n.Line, n.ShortTag(), n.Value)
		}
		*t = TargetModules{Regex: n.Value}
		return nil
	case yaml.SequenceNode:
		names := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode || c.ShortTag() != "!!str" {
				return fmt.Errorf("line %d: target_modules entries must be module names (strings)", c.Line)
			}
			names = append(names, c.Value)
		}
		*t = TargetModules{Names: names}
		return nil
	}
	return fmt.Errorf("line %d: target_modules must be a list of names or one regex string", n.Line)
}

// MarshalYAML writes Names as a sequence, Regex as a string, and unset as null.
func (t TargetModules) MarshalYAML() (any, error) {
	switch {
	case t.Names != nil:
		return t.Names, nil
	case t.Regex != "":
		return t.Regex, nil
	}
	return nil, nil
}

// MarshalJSON writes Names as an array (PEFT writes a set as a list), Regex as a string, unset as null.
func (t TargetModules) MarshalJSON() ([]byte, error) {
	v, _ := t.MarshalYAML()
	return json.Marshal(v)
}

// UnmarshalJSON reads an array of strings, a string, or null.
func (t *TargetModules) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		*t = TargetModules{}
	case string:
		*t = TargetModules{Regex: v}
	case []any:
		names := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("target_modules entries must be strings, got %v", e)
			}
			names = append(names, s)
		}
		*t = TargetModules{Names: names}
	default:
		return fmt.Errorf("target_modules must be a list of names or one regex string, got %s", b)
	}
	return nil
}

func (t TargetModules) validate() error {
	if t.Names != nil && t.Regex != "" {
		return errors.New("set either a list of names or one regex, not both")
	}
	for _, n := range t.Names {
		if strings.TrimSpace(n) == "" {
			return errors.New("holds an empty module name")
		}
	}
	if t.Regex != "" && !t.IsAllLinear() {
		if _, err := t.compile(); err != nil {
			return fmt.Errorf("%q is not a regular expression Go accepts (RE2 syntax: no look-around or "+
				"back-references): %v", t.Regex, err)
		}
	}
	return nil
}

func (t TargetModules) compile() (*regexp.Regexp, error) { return compileFullMatch(t.Regex) }

// InitLoraWeights is PEFT's init_lora_weights, which is a bool or a method name.
type InitLoraWeights string

// The initialisations tune implements (PEFT's reset_lora_parameters).
const (
	// InitDefault (true): A ~ Kaiming-uniform(a=√5), i.e. U(±1/√in), B = 0, so the adapter starts as a no-op.
	InitDefault InitLoraWeights = "true"
	// InitGaussian ("gaussian"): A ~ N(0, (1/r)²), B = 0.
	InitGaussian InitLoraWeights = "gaussian"
	// InitRandom (false): A and B both keep nn.Linear's default (Kaiming-uniform) init, so the adapter changes
	// the output from the first step; PEFT offers it for tests.
	InitRandom InitLoraWeights = "false"
)

// UnmarshalYAML reads a bool (true/false, yes/no, on/off) or a method name.
func (w *InitLoraWeights) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: init_lora_weights must be true, false or gaussian", n.Line)
	}
	var b bool
	if n.Decode(&b) == nil { // true/false, and YAML 1.1's yes/no/on/off as yaml.v3 reads them into a bool
		*w = InitLoraWeights(strconv.FormatBool(b))
		return nil
	}
	*w = InitLoraWeights(n.Value)
	return nil
}

// MarshalYAML writes true/false as bools and other methods as strings.
func (w InitLoraWeights) MarshalYAML() (any, error) {
	if b, err := strconv.ParseBool(string(w)); err == nil && (w == InitDefault || w == InitRandom) {
		return b, nil
	}
	return string(w), nil
}

// MarshalJSON writes true/false as JSON bools (as PEFT does) and other methods as strings.
func (w InitLoraWeights) MarshalJSON() ([]byte, error) {
	v, _ := w.MarshalYAML()
	return json.Marshal(v)
}

// UnmarshalJSON reads a JSON bool or string.
func (w *InitLoraWeights) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*w = InitLoraWeights(strconv.FormatBool(v))
	case string:
		*w = InitLoraWeights(v)
	default:
		return fmt.Errorf("init_lora_weights must be a bool or a method name, got %s", b)
	}
	return nil
}

func (w InitLoraWeights) validate() error {
	switch w {
	case InitDefault, InitGaussian, InitRandom:
		return nil
	}
	return fmt.Errorf("tune implements true, false and gaussian (got %q)", string(w))
}
