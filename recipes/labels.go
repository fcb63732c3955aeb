package recipes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/loaders"
)

// tooManyLabels explains a data file whose labels do not fit the model's num_labels classes. Integer labels
// are class ids 0..num_labels-1, so the error names the first one outside that range with its file:line and
// the ids the file actually holds ({1, 2} is not three classes); string labels are counted and listed.
func tooManyLabels(key string, ds *loaders.Dataset, numLabels int) error {
	const fix = "set model.config.num_labels (or use a checkpoint with that many labels)"
	if !isIDLabels(ds.LabelNames) {
		return fmt.Errorf("recipes: %s: %s has %d labels %s but the model has num_labels %d; %s",
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
		return fmt.Errorf("recipes: %s: %s has labels up to %d but the model has num_labels %d; %s",
			key, ds.Path, len(ds.LabelNames)-1, numLabels, fix)
	}
	slices.Sort(present)
	ids := make([]string, len(present))
	for i, id := range present {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return fmt.Errorf("recipes: %s: label %d at %s:%d is outside 0..%d for a model with num_labels %d: integer labels "+
		"are class ids 0..num_labels-1, and the file's labels are %s; renumber the classes from 0, or %s",
		key, first.Label, ds.Path, first.Line, numLabels-1, numLabels, strings.Join(ids, ", "), fix)
}

// quoteNames returns names quoted and comma-separated: "neg", "pos".
func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
