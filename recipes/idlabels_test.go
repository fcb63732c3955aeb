package recipes

import (
	"strings"
	"testing"

	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/trainer"
)

// TestClassIDsBesideNamesNoted: a training file labelled with names (neg, pos) beside an eval file of class
// ids (0, 1) trained and evaluated without a word, the ids taken as classes of the names' mapping, so the
// metrics may mean nothing (tester7 F1). Build now notes it, naming the eval file's line, the label and the
// mapping; files labelled alike (names and names, ids and ids) get no such note.
func TestClassIDsBesideNamesNoted(t *testing.T) {
	for _, c := range []struct {
		name        string
		train, eval []string
		note        bool
	}{
		{"names, then class ids", []string{"pos", "neg", "pos", "neg"}, []string{"neg", "1", "0"}, true},
		{"names and names", []string{"pos", "neg", "pos", "neg"}, []string{"neg", "pos"}, false},
		{"class ids and class ids", []string{"1", "0", "1", "0"}, []string{"0", "1"}, false},
	} {
		dir := t.TempDir()
		writeTSV(t, dir, "train.tsv", c.train...)
		r := labelRecipe(t, dir, "")
		r.Data.Eval = writeTSV(t, dir, "dev.tsv", c.eval...)
		run, err := Build(r, cpu.New(), trainer.WithOutput(nil))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		run.Trainer.Close()
		notes := strings.Join(run.Notices, "\n")
		want := `data.eval: ` + r.Data.Eval + `:3 has the label "1", a class id, while data.train's labels are names ("neg", "pos"): ` +
			`integer labels are taken as class ids of that mapping (0 → "neg", 1 → "pos")`
		if got := strings.Contains(notes, want); got != c.note || (!c.note && strings.Contains(notes, "a class id")) {
			t.Errorf("%s: notices %q; want the note %v", c.name, run.Notices, c.note)
		}
	}
}
