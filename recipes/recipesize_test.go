package recipes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadBoundsTheRecipeFile: a recipe file was read and parsed whole, whatever its size (tester7 F10: a
// 200 MB file took 1.1 GB). One larger than MaxRecipeBytes is refused as invalid (exit 2 from the commands),
// naming it; one of exactly MaxRecipeBytes loads.
func TestLoadBoundsTheRecipeFile(t *testing.T) {
	text, err := os.ReadFile("tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	padded := func(n int) string {
		p := filepath.Join(dir, "r.yaml")
		b := append([]byte(nil), text...)
		b = append(b, '#')
		b = append(b, strings.Repeat("x", n-len(b)-1)...)
		b = append(b, '\n')
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := Load(padded(MaxRecipeBytes), nil); err != nil {
		t.Fatalf("a recipe of %d bytes: %v", MaxRecipeBytes, err)
	}
	p := padded(MaxRecipeBytes + 1)
	_, err = Load(p, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p+": is larger than 1048576 bytes, which is not a recipe") {
		t.Fatalf("a recipe of %d bytes: %v", MaxRecipeBytes+1, err)
	}
}
