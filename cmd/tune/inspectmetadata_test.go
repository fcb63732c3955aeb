package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// TestInspectClipsMetadata (tester10 T10-9): tune inspect printed a safetensors __metadata__ value whole (50 MB
// of it in one line). Each value is cut to maxMetadataValBytes with its length noted, a long key likewise, at most
// maxMetadataKeys keys are listed with a count of the rest, and short metadata prints as before.
func TestInspectClipsMetadata(t *testing.T) {
	meta := map[string]string{"format": "pt", "notes": strings.Repeat("é", 1<<19), strings.Repeat("k", 100): "v"}
	for i := range 40 {
		meta[fmt.Sprintf("z%02d", i)] = "x"
	}
	w, err := loaders.NewHostTensor("w", tensor.F32, []int{2}, []float32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := loaders.WriteSafetensors(p, []loaders.HostTensor{w}, meta); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("inspect", p)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	line, _, _ := strings.Cut(stdout[strings.Index(stdout, "metadata:"):], "\n")
	for _, want := range []string{
		`format="pt"`,
		`notes="` + strings.Repeat("é", maxMetadataValBytes/2) + `"… (1,048,576 bytes, the first 200 shown)`,
		strings.Repeat("k", maxMetadataKeyBytes) + `… (100 bytes, the first 64 shown)="v"`,
		fmt.Sprintf("(and %d more keys)", len(meta)-maxMetadataKeys),
	} {
		if !strings.Contains(line, want) {
			t.Errorf("metadata line lacks %q:\n%.600s", want, line)
		}
	}
	if len(line) > 2000 {
		t.Errorf("the metadata line is %d bytes", len(line))
	}
	if got := formatMetadata(map[string]string{"format": "pt", "a": `say "hi"`}); got != `a="say \"hi\"" format="pt"` {
		t.Errorf("short metadata: %s", got)
	}
}

// TestInspectQuotesUnprintableNames (tester 12): a tensor named "\x1b[31mred\x1b[0m\n" sent the terminal escape
// and a newline to the user's terminal and broke the table. Names and metadata keys that do not print are
// shown quoted; printable ones, as they are.
func TestInspectQuotesUnprintableNames(t *testing.T) {
	evil := "\x1b[31mred\x1b[0m\n"
	w, err := loaders.NewHostTensor(evil, tensor.F32, []int{2}, []float32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := loaders.NewHostTensor("encoder.weight", tensor.F32, []int{1}, []float32{3})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "model.safetensors")
	if err := loaders.WriteSafetensors(p, []loaders.HostTensor{w, ok}, map[string]string{"bell\a": "v"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("inspect", p)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if strings.ContainsAny(stdout, "\x1b\a") || strings.Contains(stdout, "red\x1b") {
		t.Errorf("inspect printed control characters from the file:\n%q", stdout)
	}
	for _, want := range []string{`"\x1b[31mred\x1b[0m\n"`, `"bell\a"="v"`, "encoder.weight "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %s:\n%s", want, stdout)
		}
	}
}
