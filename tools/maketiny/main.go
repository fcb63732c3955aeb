package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
)

// maxLength is the model_max_length written to tokenizer_config.json, the max_position_embeddings of
// recipes/tiny.yaml.
const maxLength = 64

type options struct {
	out        string
	seed       uint64
	train, dev int
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "recipes/data/tiny", "directory to write the dataset and vocabulary into")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the generator")
	flag.IntVar(&o.train, "train", 4000, "number of training rows")
	flag.IntVar(&o.dev, "dev", 500, "number of dev rows")
	flag.Parse()
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// example is one labelled sentence.
type example struct {
	text  string
	label int
}

// generate draws n+m distinct examples, labels alternating so both sets are balanced, and splits them into
// train (n) and dev (m).
func generate(seed uint64, n, m int) (train, dev []example) {
	r := rand.New(rand.NewPCG(seed, 0x74696e79)) // "tiny"
	seen := map[string]bool{}
	all := make([]example, 0, n+m)
	for len(all) < n+m {
		want := len(all) % 2
		s, y := sentence(r)
		if y != want || seen[s] {
			continue
		}
		seen[s] = true
		all = append(all, example{s, y})
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:n], all[n:]
}

// files returns the name and content of every file maketiny writes, in writing order.
func files(o options) ([][2]string, error) {
	train, dev := generate(o.seed, o.train, o.dev)
	var texts []string
	for _, e := range append(append([]example{}, train...), dev...) {
		texts = append(texts, e.text)
	}
	vocab, err := buildVocab(texts)
	if err != nil {
		return nil, err
	}
	tj, err := tokenizerJSON(vocab)
	if err != nil {
		return nil, err
	}
	tc, err := tokenizerConfigJSON(maxLength)
	if err != nil {
		return nil, err
	}
	return [][2]string{
		{"train.tsv", tsv(train)},
		{"dev.tsv", tsv(dev)},
		{"vocab.txt", strings.Join(vocab, "\n") + "\n"},
		{"tokenizer.json", string(tj)},
		{"tokenizer_config.json", string(tc)},
	}, nil
}

func tsv(es []example) string {
	var b strings.Builder
	b.WriteString("sentence\tlabel\n")
	for _, e := range es {
		fmt.Fprintf(&b, "%s\t%d\n", e.text, e.label)
	}
	return b.String()
}

// run writes the files into o.out (each through a temporary file and a rename) and prints what it wrote and
// how hard the task is for one-word rules.
func run(o options, w io.Writer) error {
	fs, err := files(o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("maketiny: %w", err)
	}
	for _, f := range fs {
		p := filepath.Join(o.out, f[0])
		if err := writeFile(p, []byte(f[1])); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s (%d bytes)\n", p, len(f[1]))
	}
	train, dev := generate(o.seed, o.train, o.dev)
	st := measure(train, dev)
	fmt.Fprintf(w, "train %d rows, dev %d rows, %.1f%% positive; best one-word rule on dev %.1f%% (%s); "+
		"naive Bayes on dev: words %.1f%%, words+pairs %.1f%%\n", len(train), len(dev), 100*st.positive,
		100*st.bestWordAcc, st.bestWord, 100*st.naiveBayesAcc, 100*st.bigramAcc)
	return nil
}

// writeFile writes data to path (mode 0644) through a temporary file and a rename (atomicfile.WriteFile).
func writeFile(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("maketiny: %w", err)
	}
	return nil
}

// stats says how balanced the data is and how far simple bag-of-words rules get on dev.
type stats struct {
	positive      float64 // fraction of positive rows over train and dev
	bestWord      string
	bestWordAcc   float64 // best "word w present → label a, else b" rule, fitted on train, scored on dev
	naiveBayesAcc float64 // naive Bayes over word presence, add-one smoothing, fitted on train, scored on dev
	bigramAcc     float64 // the same over words and word pairs ("not good"): what local context buys
}

// features returns the set of words of s, and with bigrams also its adjacent word pairs.
func features(s string, bigrams bool) map[string]bool {
	set := map[string]bool{}
	ws := preTokenize(s)
	for i, w := range ws {
		set[w] = true
		if bigrams && i > 0 {
			set[ws[i-1]+" "+w] = true
		}
	}
	return set
}

func measure(train, dev []example) stats {
	var st stats
	pos := 0
	for _, e := range append(append([]example{}, train...), dev...) {
		pos += e.label
	}
	st.positive = float64(pos) / float64(len(train)+len(dev))

	words := func(e example) map[string]bool { return features(e.text, false) }
	// count[w][y] = number of train rows of label y containing w.
	count := map[string]*[2]float64{}
	var rows [2]float64
	for _, e := range train {
		rows[e.label]++
		for w := range words(e) {
			if count[w] == nil {
				count[w] = &[2]float64{}
			}
			count[w][e.label]++
		}
	}
	devWords := make([]map[string]bool, len(dev))
	for i, e := range dev {
		devWords[i] = words(e)
	}
	for w, c := range count {
		// Present → the majority label among rows with w; absent → the majority among rows without it.
		in, out := argmax(c[0], c[1]), argmax(rows[0]-c[0], rows[1]-c[1])
		right := 0
		for i, e := range dev {
			pred := out
			if devWords[i][w] {
				pred = in
			}
			if pred == e.label {
				right++
			}
		}
		if acc := float64(right) / float64(len(dev)); acc > st.bestWordAcc || acc == st.bestWordAcc && w < st.bestWord {
			st.bestWordAcc, st.bestWord = acc, w
		}
	}
	st.naiveBayesAcc = naiveBayes(train, dev, false)
	st.bigramAcc = naiveBayes(train, dev, true)
	return st
}

// naiveBayes fits a Bernoulli-presence naive Bayes on train and returns its accuracy on dev.
func naiveBayes(train, dev []example, bigrams bool) float64 {
	count := map[string]*[2]float64{}
	var rows [2]float64
	for _, e := range train {
		rows[e.label]++
		for f := range features(e.text, bigrams) {
			if count[f] == nil {
				count[f] = &[2]float64{}
			}
			count[f][e.label]++
		}
	}
	right := 0
	for _, e := range dev {
		var score [2]float64
		for y := range 2 {
			score[y] = math.Log(rows[y])
			for f := range features(e.text, bigrams) {
				c := 0.0
				if count[f] != nil {
					c = count[f][y]
				}
				score[y] += math.Log((c + 1) / (rows[y] + 2))
			}
		}
		if argmax(score[0], score[1]) == e.label {
			right++
		}
	}
	return float64(right) / float64(len(dev))
}

func argmax(a, b float64) int {
	if b > a {
		return 1
	}
	return 0
}

// compareFiles reports the first file whose content differs between dir and want (used by the test and -check).
func compareFiles(dir string, want [][2]string) error {
	for _, f := range want {
		got, err := os.ReadFile(filepath.Join(dir, f[0]))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, []byte(f[1])) {
			return fmt.Errorf("%s differs from what maketiny generates: run `make data`", filepath.Join(dir, f[0]))
		}
	}
	return nil
}
