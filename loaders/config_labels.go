package loaders

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// checkLabels checks the class names config.json gives: id2label names each class once, and label2id, when
// the file has it (hasLabel2ID), is id2label's exact inverse. The ids themselves (0..n-1, no gap) are
// checked by Validate.
//
// transformers' PretrainedConfig takes both maps as written and derives label2id from id2label only when it is
// absent; its pipelines then name predictions through id2label while run_glue maps data labels through
// label2id, so a pair that disagrees trains one mapping and reports another. tune maps through id2label, and
// refuses such a pair rather than guess which one the classifier's rows follow. One disagreement is accepted:
// label2id left at the placeholders LABEL_0..LABEL_{n-1} next to a named id2label, which is what saving a
// config after setting only config.id2label gives; the placeholders name nothing, and the caller rebuilds
// label2id from id2label (the result reports that with rebuild).
func checkLabels(id2label map[int]string, label2id map[string]int, hasLabel2ID bool) (rebuild bool, err error) {
	ids := make([]int, 0, len(id2label))
	for id := range id2label {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	first := make(map[string]int, len(ids))
	for _, id := range ids {
		name := id2label[id]
		if j, dup := first[name]; dup {
			return false, fmt.Errorf("\"id2label\" names both class %d and class %d %q: each class needs its own name "+
				"(rename one; label2id is derived from id2label)", j, id, name)
		}
		first[name] = id
	}
	if !hasLabel2ID {
		return false, nil
	}
	var issues []string
	names := make([]string, 0, len(label2id))
	for name := range label2id {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		id := label2id[name]
		if want, ok := first[name]; !ok {
			issues = append(issues, fmt.Sprintf("label2id maps %q to %d, but id2label has no class %q", name, id, name))
		} else if id != want {
			issues = append(issues, fmt.Sprintf("label2id maps %q to %d, but id2label names class %d %q", name, id, want, name))
		}
	}
	for _, id := range ids {
		if _, ok := label2id[id2label[id]]; !ok {
			issues = append(issues, fmt.Sprintf("label2id lacks %q (class %d in id2label)", id2label[id], id))
		}
	}
	if len(issues) == 0 {
		return false, nil
	}
	if isPlaceholderLabel2ID(label2id) {
		return true, nil
	}
	return false, fmt.Errorf("\"label2id\" is not the inverse of \"id2label\" %s: %s; make label2id the inverse of "+
		"id2label (the names the classifier's rows were trained as), or delete label2id to derive it from id2label",
		formatID2Label(id2label, ids), strings.Join(issues, "; "))
}

// isPlaceholderLabel2ID reports whether label2id is transformers' default {"LABEL_0": 0, "LABEL_1": 1, ...}.
func isPlaceholderLabel2ID(label2id map[string]int) bool {
	for name, id := range label2id {
		if name != "LABEL_"+strconv.Itoa(id) {
			return false
		}
	}
	return len(label2id) > 0
}

// formatID2Label writes id2label in id order, as {0: "neg", 1: "pos"}.
func formatID2Label(id2label map[int]string, ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id) + ": " + strconv.Quote(id2label[id])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
