package recipes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/loaders"
)

// tooManyLabels explains a data file whose labels do not fit the model's num_labels classes. Integer labels
// are class ids 0..num_labels-1, so the error names the first one outside that range with its file:line and
// the ids the file actually holds ({1, 2} is not three classes); string labels are counted and listed.
func tooManyLabels(key string, ds *loaders.Dataset, numLabels int) error {
	const fix = "set model.num_labels (with model.path) or model.config.num_labels (a new model)"
	if !isIDLabels(ds.LabelNames) {
		if e := firstExtraLabel(ds, numLabels); e != nil {
			return badinput.Errorf("recipes: %s: %s:%d: label %q does not fit: %s has %d labels %s but the model has "+
				"num_labels %d; fix the rows with it, or %s", key, ds.Path, e.Line, ds.LabelNames[e.Label], ds.Path,
				len(ds.LabelNames), quoteNames(ds.LabelNames), numLabels, fix)
		}
		return badinput.Errorf("recipes: %s: %s has %d labels %s but the model has num_labels %d; %s",
			key, ds.Path, len(ds.LabelNames), quoteNames(ds.LabelNames), numLabels, fix)
	}
	var present []int64
	var first *loaders.Example
	for i := range ds.Examples {
		e := &ds.Examples[i]
		if e.Label == loaders.IgnoreLabel {
			continue
		}
		if !slices.Contains(present, e.Label) {
			present = append(present, e.Label)
		}
		if first == nil && e.Label >= int64(numLabels) {
			first = e
		}
	}
	if first == nil { // LabelNames and the examples disagree; say what is known
		return badinput.Errorf("recipes: %s: %s has labels up to %d but the model has num_labels %d; %s",
			key, ds.Path, len(ds.LabelNames)-1, numLabels, fix)
	}
	slices.Sort(present)
	ids := make([]string, len(present))
	for i, id := range present {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return badinput.Errorf("recipes: %s: label %d at %s:%d is outside 0..%d for a model with num_labels %d: integer labels "+
		"are class ids 0..num_labels-1, and the file's labels are %s; renumber the classes from 0, or %s",
		key, first.Label, ds.Path, first.Line, numLabels-1, numLabels, strings.Join(ids, ", "), fix)
}

// labelOutOfRange is tooManyLabels' message for an integer label that LoadDataset found beyond num_labels.
func labelOutOfRange(key string, e *loaders.LabelRangeError) error {
	ids := make([]string, len(e.Labels))
	for i, id := range e.Labels {
		ids[i] = strconv.FormatInt(id, 10)
	}
	list := strings.Join(ids, ", ")
	if e.More > 0 {
		list += fmt.Sprintf(" and %d more", e.More)
	}
	return badinput.Errorf("recipes: %s: label %d at %s:%d is outside 0..%d for a model with num_labels %d: integer labels "+
		"are class ids 0..num_labels-1, and the file's labels are %s; renumber the classes from 0, or set "+
		"model.num_labels (with model.path) or model.config.num_labels (a new model)",
		key, e.Label, e.Path, e.Line, e.NumLabels-1, e.NumLabels, list)
}

// firstExtraLabel returns the first example, in file order, whose string label is one the model has no class
// for: when some of the file's labels are class ids 0..numLabels-1 ("0", "1" beside "banana"), the first
// label that is not one; otherwise the first row of the (numLabels+1)-th distinct label. Nil when there is
// none (the examples hold no labels).
func firstExtraLabel(ds *loaders.Dataset, numLabels int) *loaders.Example {
	isID := func(name string) bool {
		id, err := strconv.Atoi(name)
		return err == nil && id >= 0 && id < numLabels
	}
	someIDs := slices.ContainsFunc(ds.LabelNames, isID)
	seen := make(map[int64]bool)
	for i := range ds.Examples {
		e := &ds.Examples[i]
		if e.Label < 0 || e.Label >= int64(len(ds.LabelNames)) {
			continue // IgnoreLabel
		}
		if someIDs {
			if !isID(ds.LabelNames[e.Label]) {
				return e
			}
			continue
		}
		if !seen[e.Label] {
			seen[e.Label] = true
			if len(seen) > numLabels {
				return e
			}
		}
	}
	return nil
}

// quoteNames returns names quoted and comma-separated: "neg", "pos".
func quoteNames(names []string) string { return loaders.QuoteNames(names) }

// dataOptions returns the loaders options for reading a data file with d's format and columns; loadDataset adds
// the label handling.
func dataOptions(d Data) loaders.DatasetOptions {
	return loaders.DatasetOptions{Format: d.Format, TextColumn: d.TextColumn, TextPairColumn: d.TextPairColumn,
		LabelColumn: d.LabelColumn}
}

// trainingLabels returns the class names a checkpoint (model.path) is to be fine-tuned with when its own do not
// fit the training file, else nil (LoadOptions.Labels: keep the checkpoint's), adding a notice that says
// why. It follows transformers' run_glue: a model whose id2label holds real names (not the placeholders
// LABEL_0, ...) keeps its mapping when the data's labels are among those names (or are class ids), so that the
// classifier's rows keep their meaning; when the data holds a label the model does not name, the model's
// labels are dropped for the data's, sorted as for a new model, and LoadPretrained re-initialises the
// classifier if their number differs from num_labels. Names that differ from the model's only in case keep the
// model's order under the data's spelling (run_glue compares lower-cased names). Regression models, integer
// labels (class ids), files of a single label (no classifier) and files that cannot be read keep the
// checkpoint's labels: loading the file then reports what is wrong, naming file:line.
//
// With the placeholder names, the data's classes are counted as run_glue counts them (num_labels =
// len(label_list)): string labels that outnumber num_labels, or integer class ids at or beyond it, set
// num_labels to theirs (returned as numLabels, LoadOptions.NumLabels) and the classifier is initialised
// afresh, with a notice. model.num_labels, when set, decides instead.
func (run *Run) trainingLabels() (labels []string, numLabels int) {
	r := run.Recipe
	if r.Model.Path == "" {
		return nil, 0
	}
	hf, err := loaders.ReadBertConfig(r.Model.Path)
	if err != nil {
		return nil, 0 // LoadPretrained reports it, naming model.path
	}
	model := make([]string, hf.NumLabels())
	for i := range model {
		model[i] = hf.ID2Label[i]
	}
	if n := r.Model.NumLabels; n > 0 {
		if n != len(model) {
			run.Notices = append(run.Notices, fmt.Sprintf("model.num_labels %d differs from the checkpoint's num_labels %d "+
				"(model.path %s): the classifier is initialised afresh for %d classes (LABEL_0..LABEL_%d), as "+
				"from_pretrained(num_labels=%d, ignore_mismatched_sizes=True) does", n, len(model), r.Model.Path, n, n-1, n))
		}
		return nil, n
	}
	if r.Data.Train == "" || hf.ProblemType == loaders.ProblemRegression {
		return nil, 0
	}
	if len(model) < 2 || isDefaultLabels(model) {
		return nil, run.countedLabels(len(model))
	}
	ds, err := loaders.LoadDataset(r.Data.Train, dataOptions(r.Data))
	if err != nil || len(ds.LabelNames) < 2 || isIDLabels(ds.LabelNames) {
		return nil, 0
	}
	data := ds.LabelNames // sorted
	if fitsLabels(model, data) {
		return nil, 0
	}
	if names := matchCase(model, data); names != nil {
		run.Notices = append(run.Notices, fmt.Sprintf("the model's labels %q (model.path %s) match the data's %q "+
			"(data.train %s) but for case; training keeps the model's classes in their order, named as in the data: %q",
			model, r.Model.Path, data, r.Data.Train, names))
		return names, 0
	}
	head := "the classifier keeps its weights, its row i now standing for the data's label i"
	if len(data) != len(model) {
		head = fmt.Sprintf("num_labels becomes %d and the classifier is initialised afresh", len(data))
	}
	run.Notices = append(run.Notices, fmt.Sprintf("the model's labels %q (model.path %s) differ from the data's %q "+
		"(data.train %s); training uses the data's labels, sorted as for a new model, and the saved config.json names "+
		"them; %s", model, r.Model.Path, data, r.Data.Train, head))
	return data, 0
}

// countedLabels returns the number of classes the training file needs when a checkpoint with placeholder
// labels has fewer (string labels: their count; integer labels: the largest id + 1), else 0 (keep the
// checkpoint's), noting the change. A one-class checkpoint (regression) and a file that cannot be read keep
// the checkpoint's: loading the file reports what is wrong.
func (run *Run) countedLabels(have int) int {
	r := run.Recipe
	if have < 2 {
		return 0
	}
	ds, err := loaders.LoadDataset(r.Data.Train, dataOptions(r.Data))
	if err != nil || len(ds.LabelNames) < 2 {
		return 0
	}
	need, what := len(ds.LabelNames), fmt.Sprintf("has %d labels %s", len(ds.LabelNames), quoteNames(ds.LabelNames))
	if isIDLabels(ds.LabelNames) {
		top := int64(-1)
		for _, e := range ds.Examples {
			top = max(top, e.Label)
		}
		need, what = int(top)+1, fmt.Sprintf("holds class ids up to %d", top)
	}
	if need <= have {
		return 0
	}
	run.Notices = append(run.Notices, fmt.Sprintf("data.train %s %s but the checkpoint has num_labels %d (model.path %s): "+
		"num_labels becomes %d and the classifier is initialised afresh, as transformers' run_glue does "+
		"(from_pretrained with the data's num_labels and ignore_mismatched_sizes); set model.num_labels to choose",
		r.Data.Train, what, have, r.Model.Path, need))
	return need
}

// fitsLabels reports whether every data label names one of the model's classes or is a class id
// 0..len(model)-1, so that the data maps through the model's id2label.
func fitsLabels(model, data []string) bool {
	for _, n := range data {
		if slices.Contains(model, n) {
			continue
		}
		if id, err := strconv.Atoi(n); err == nil && id >= 0 && id < len(model) {
			continue
		}
		return false
	}
	return true
}

// matchCase returns the model's labels spelled as in data when the two sets are the same but for case (and
// each is distinct under lower-casing), else nil.
func matchCase(model, data []string) []string {
	if len(model) != len(data) {
		return nil
	}
	spelling := make(map[string]string, len(data))
	for _, n := range data {
		spelling[strings.ToLower(n)] = n
	}
	names := make([]string, len(model))
	used := make(map[string]bool, len(model))
	for i, n := range model {
		s, ok := spelling[strings.ToLower(n)]
		if !ok || used[s] || len(spelling) != len(data) {
			return nil
		}
		names[i], used[s] = s, true
	}
	return names
}
