package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tune-ml/tune/internal/testutil"
)

func defaultOptions(t *testing.T) options {
	return options{out: filepath.Join(testutil.RepoRoot(t), "recipes", "data", "tiny"), seed: 1, train: 4000, dev: 500}
}

// TestCommittedFilesAreGenerated: the files under recipes/data/tiny are exactly what the generator writes, so
// the data can always be rebuilt from the code (`make data`).
func TestCommittedFilesAreGenerated(t *testing.T) {
	o := defaultOptions(t)
	want, err := files(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := compareFiles(o.out, want); err != nil {
		t.Fatal(err)
	}
}

// TestRunWritesDeterministically: two runs with the same seed write byte-identical files, another seed differs.
func TestRunWritesDeterministically(t *testing.T) {
	o := options{seed: 7, train: 200, dev: 50}
	o.out = t.TempDir()
	var log strings.Builder
	if err := run(o, &log); err != nil {
		t.Fatal(err)
	}
	again, _ := files(o)
	if err := compareFiles(o.out, again); err != nil {
		t.Error(err)
	}
	if !strings.Contains(log.String(), "train 200 rows, dev 50 rows, 50.0% positive") {
		t.Errorf("summary line missing: %s", log.String())
	}
	other, _ := files(options{seed: 8, train: 200, dev: 50})
	if other[0][1] == again[0][1] {
		t.Error("seeds 7 and 8 gave the same train.tsv")
	}
}

// oracle labels a sentence by reading it, independently of the generator: find the clause that decides
// (the one after "but", the main clause after "although ...,", the sentence beside a distractor clause), take
// its last sentiment adjective, and flip it when the clause negates it.
func oracle(t *testing.T, s string) int {
	s = strings.ToLower(strings.TrimRight(s, ".!"))
	clause := s
	switch {
	case strings.Contains(s, ", but "):
		clause = s[strings.Index(s, ", but ")+len(", but "):]
	case strings.HasPrefix(s, "although "):
		clause = s[strings.Index(s, ", ")+2:]
	case strings.Contains(s, "; "):
		clause = s[:strings.Index(s, "; ")]
	case strings.Contains(s, ", and ") && slices.ContainsFunc(distractors, func(d string) bool {
		return strings.HasPrefix(s, strings.ToLower(d))
	}):
		clause = s[strings.Index(s, ", and ")+len(", and "):]
	}
	polarity := -1
	for _, w := range strings.Fields(clause) {
		switch {
		case slices.Contains(positive, w):
			polarity = 1
		case slices.Contains(negative, w):
			polarity = 0
		}
	}
	if polarity < 0 {
		t.Fatalf("no sentiment word in the deciding clause %q of %q", clause, s)
	}
	for _, neg := range []string{" not ", " never ", " hardly ", "nothing about ", "did not find "} {
		if strings.Contains(" "+clause, neg) {
			return 1 - polarity
		}
	}
	return polarity
}

// TestLabels checks every committed row against the oracle, the balance, and that dev is unseen in train.
func TestLabels(t *testing.T) {
	train, dev := generate(1, 4000, 500)
	seen := map[string]bool{}
	pos := 0
	for _, e := range train {
		seen[e.text] = true
	}
	for i, e := range append(append([]example{}, train...), dev...) {
		if got := oracle(t, e.text); got != e.label {
			t.Errorf("%q: label %d, reading it gives %d", e.text, e.label, got)
		}
		if i >= len(train) && seen[e.text] {
			t.Errorf("dev sentence %q is also in train", e.text)
		}
		pos += e.label
	}
	if pos != 2250 {
		t.Errorf("%d positive rows of 4500, want exactly half", pos)
	}
	negations := 0
	for _, e := range train {
		if strings.Contains(e.text, " not ") || strings.Contains(e.text, " never ") {
			negations++
		}
	}
	if negations < len(train)/5 {
		t.Errorf("only %d of %d train rows negate: negation must be common enough to learn", negations, len(train))
	}
}

// TestNotOneWord: no one-word rule and no bag-of-words model solves the task (negation and contrast), while
// word pairs help, so a model must read context.
func TestNotOneWord(t *testing.T) {
	train, dev := generate(1, 4000, 500)
	st := measure(train, dev)
	if st.bestWordAcc > 0.6 {
		t.Errorf("the one-word rule %q reaches %.1f%% on dev; the task is too easy", st.bestWord, 100*st.bestWordAcc)
	}
	if st.naiveBayesAcc > 0.7 {
		t.Errorf("bag-of-words naive Bayes reaches %.1f%%; the task is too easy", 100*st.naiveBayesAcc)
	}
	if st.bigramAcc <= st.naiveBayesAcc {
		t.Errorf("word pairs (%.1f%%) should beat single words (%.1f%%)", 100*st.bigramAcc, 100*st.naiveBayesAcc)
	}
}

// TestVocabulary: the specials come first, every word of the data tokenizes without [UNK], the split words
// split as intended, and tokenizer.json agrees with vocab.txt.
func TestVocabulary(t *testing.T) {
	dir := defaultOptions(t).out
	raw, err := os.ReadFile(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	vocab := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(vocab) != vocabSize || !slices.Equal(vocab[:5], []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
		t.Fatalf("vocab has %d entries starting %v", len(vocab), vocab[:5])
	}
	ids := map[string]int{}
	for i, v := range vocab {
		if _, dup := ids[v]; dup {
			t.Errorf("duplicate vocab entry %q", v)
		}
		ids[v] = i
	}
	for _, name := range []string{"train.tsv", "dev.tsv"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
			text, _, _ := strings.Cut(line, "\t")
			for _, w := range preTokenize(text) {
				got := wordPiece(w, ids)
				if slices.Contains(got, "[UNK]") {
					t.Fatalf("%s: %q tokenizes to [UNK] in %q", name, w, text)
				}
				if want, ok := splitWords[w]; ok && !slices.Equal(got, want) {
					t.Errorf("%q splits as %v, want %v", w, got, want)
				}
				if _, ok := splitWords[w]; !ok && len(got) != 1 {
					t.Errorf("%q splits as %v, want one token", w, got)
				}
			}
		}
	}
	var tj struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	if len(tj.Model.Vocab) != len(vocab) {
		t.Errorf("tokenizer.json has %d vocab entries, vocab.txt %d", len(tj.Model.Vocab), len(vocab))
	}
	for v, id := range tj.Model.Vocab {
		if ids[v] != id {
			t.Errorf("tokenizer.json gives %q id %d, vocab.txt %d", v, id, ids[v])
		}
	}
	if len(tj.AddedTokens) != 5 || tj.AddedTokens[2].Content != "[CLS]" || tj.AddedTokens[2].ID != 2 {
		t.Errorf("added_tokens %+v", tj.AddedTokens)
	}
}
