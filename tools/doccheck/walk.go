package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// check parses the non-test Go files of every package the patterns name and checks each package. A pattern
// is a directory ("loaders") or a directory and everything below it ("./..."); directories named testdata or
// vendor, those starting with "." or "_", and those under a skip path are left out, as the go command does.
// A file that does not parse is an error naming it.
func check(patterns, skip []string, opt Options) ([]Finding, error) {
	dirs, err := expand(patterns, skip)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parseDir(fset, dir)
		if err != nil {
			return nil, err
		}
		for _, files := range pkgs {
			out = append(out, checkPackage(fset, files, opt)...)
		}
	}
	return out, nil
}

// expand turns patterns into a sorted list of directories that hold .go files.
func expand(patterns, skip []string) ([]string, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		skipped[filepath.Clean(s)] = true
	}
	seen := map[string]bool{}
	var dirs []string
	addDir := func(dir string) {
		dir = filepath.Clean(dir)
		if !seen[dir] && hasGoFiles(dir) {
			seen[dir] = true
			dirs = append(dirs, dir)
		}
	}
	for _, p := range patterns {
		root, recursive := strings.CutSuffix(filepath.ToSlash(p), "/...")
		if p == "..." {
			root, recursive = ".", true
		}
		root = filepath.FromSlash(root)
		info, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("doccheck: %s is not a directory; give a package directory or DIR/...", root)
		}
		if !recursive {
			addDir(root)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			name := d.Name()
			if path != root && (name == "testdata" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) || skipped[filepath.Clean(path)] {
				return filepath.SkipDir
			}
			addDir(path)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// hasGoFiles reports whether dir holds a non-test .go file.
func hasGoFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if isSource(e.Name()) && !e.IsDir() {
			return true
		}
	}
	return false
}

// isSource reports whether name is a Go file that is not a test.
func isSource(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, ".")
}

// parseDir parses dir's non-test Go files with their comments, grouped by package name.
func parseDir(fset *token.FileSet, dir string) (map[string][]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	pkgs := map[string][]*ast.File{}
	for _, e := range entries {
		if e.IsDir() || !isSource(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		pkgs[f.Name.Name] = append(pkgs[f.Name.Name], f)
	}
	return pkgs, nil
}
