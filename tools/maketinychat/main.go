package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
)

var (
	fruits    = [][2]string{{"banana", "yellow"}, {"apple", "red"}, {"lime", "green"}, {"plum", "purple"}, {"orange", "orange"}, {"lemon", "yellow"}, {"cherry", "red"}, {"grape", "purple"}, {"pear", "green"}, {"blueberry", "blue"}}
	opposites = [][2]string{{"hot", "cold"}, {"big", "small"}, {"fast", "slow"}, {"up", "down"}, {"old", "new"}, {"dark", "light"}, {"open", "closed"}, {"early", "late"}}
	systems   = []string{"", "You are a helpful assistant.", "Answer in one sentence."}
)

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func article(w string) string {
	if w[0] == 'a' || w[0] == 'e' || w[0] == 'i' || w[0] == 'o' || w[0] == 'u' {
		return "An " + w
	}
	return "A " + w
}

func turn(r *rand.Rand) (string, string) {
	switch r.IntN(3) {
	case 0:
		f := fruits[r.IntN(len(fruits))]
		a := article(f[0])
		return fmt.Sprintf("What colour is %s?", strings.ToLower(a[:1])+a[1:]), fmt.Sprintf("%s is %s.", a, f[1])
	case 1:
		a, b := r.IntN(10), r.IntN(10)
		return fmt.Sprintf("What is %d plus %d?", a, b), fmt.Sprintf("%d plus %d is %d.", a, b, a+b)
	}
	o := opposites[r.IntN(len(opposites))]
	if r.IntN(2) == 0 {
		o[0], o[1] = o[1], o[0]
	}
	return fmt.Sprintf("What is the opposite of %s?", o[0]), fmt.Sprintf("The opposite of %s is %s.", o[0], o[1])
}

func conversation(r *rand.Rand) []message {
	var ms []message
	if s := systems[r.IntN(len(systems))]; s != "" {
		ms = append(ms, message{"system", s})
	}
	for n := 1 + r.IntN(2); n > 0; n-- {
		q, a := turn(r)
		ms = append(ms, message{"user", q}, message{"assistant", a})
	}
	return ms
}

func main() {
	out := flag.String("out", "recipes/data/tiny-chat", "output directory")
	seed := flag.Uint64("seed", 7, "seed")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, 1))
	seen := map[string]bool{}
	write := func(name string, n int) {
		var buf bytes.Buffer
		for k := 0; k < n; {
			line, _ := json.Marshal(map[string]any{"messages": conversation(r)})
			if seen[string(line)] {
				continue
			}
			seen[string(line)] = true
			buf.Write(line)
			buf.WriteByte('\n')
			k++
		}
		if err := atomicfile.WriteFile(filepath.Join(*out, name), buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	write("train.jsonl", 1200)
	write("dev.jsonl", 100)
	// text.jsonl: the same kind of exchanges as plain text, for base (non-chat) models: {"text": "Q: ... A: ..."}.
	var buf bytes.Buffer
	for k := 0; k < 1200; k++ {
		q, a := turn(r)
		line, _ := json.Marshal(map[string]string{"text": "Q: " + q + " A: " + a})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := atomicfile.WriteFile(filepath.Join(*out, "text.jsonl"), buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
