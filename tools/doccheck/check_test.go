package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// findings parses srcs (file name → source, one package) and returns checkPackage's findings as
// "file:line: message".
func findings(t *testing.T, srcs map[string]string, opt Options) []string {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range slices.Sorted(maps.Keys(srcs)) {
		f, err := parser.ParseFile(fset, name, srcs[name], parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files = append(files, f)
	}
	var out []string
	for _, f := range checkPackage(fset, files, opt) {
		out = append(out, f.Pos.Filename+":"+strconv.Itoa(f.Pos.Line)+": "+f.Msg)
	}
	return out
}

// pkg is a package clause with a valid package comment, to which each row appends its declarations.
const pkg = "// Package p is a test package.\npackage p\n"

func TestCheckPackage(t *testing.T) {
	tests := []struct {
		name string
		srcs map[string]string
		opt  Options
		want []string // "file:line: message", in order; nil for a clean package
	}{
		{
			name: "documented func, type, method, const and var pass",
			srcs: map[string]string{"a.go": pkg + `
// Open opens.
func Open() {}

// A Tensor is a view.
type Tensor struct{}

// The Shape is its extents.
func (t *Tensor) Shape() []int { return nil }

// MaxRank is the largest rank.
const MaxRank = 8

// ErrShape reports a shape mismatch.
var ErrShape error
`},
		},
		{
			name: "missing doc comments on exported func, type, method, const, var",
			srcs: map[string]string{"a.go": pkg + `
func Open() {}
type Tensor struct{}
func (t Tensor) Shape() []int { return nil }
const MaxRank = 8
var ErrShape error
`},
			want: []string{
				"a.go:4: func Open has no doc comment",
				"a.go:5: type Tensor has no doc comment",
				"a.go:6: method Tensor.Shape has no doc comment",
				"a.go:7: const MaxRank has no doc comment",
				"a.go:8: var ErrShape has no doc comment",
			},
		},
		{
			name: "unexported identifiers and methods of unexported types are not checked",
			srcs: map[string]string{"a.go": pkg + `
func open() {}
type tensor struct{}
func (t *tensor) Shape() []int { return nil }
const maxRank = 8
var errShape, _ = error(nil), 0
`},
		},
		{
			name: "doc comment that does not start with the name",
			srcs: map[string]string{"a.go": pkg + `
// opens a file.
func Open() {}

// Opener opens; Open is not Opener.
func Open2() {}

// An tensor view.
type Tensor struct{}
`},
			want: []string{
				`a.go:5: func Open's doc comment should start with its name: "Open ..." (it starts "opens a file.")`,
				`a.go:8: func Open2's doc comment should start with its name: "Open2 ..." (it starts "Opener opens; Open is not Opener.")`,
				`a.go:11: type Tensor's doc comment should start with its name: "Tensor ..." (it starts "An tensor view.")`,
			},
		},
		{
			name: "a name followed by punctuation counts as starting with it",
			srcs: map[string]string{"a.go": pkg + `
// Open's result must be closed.
func Open() {}

// Close, like os.File.Close, releases it.
func Close() {}
`},
		},
		{
			name: "generic receivers: method on exported T[E] is checked, on unexported t[E] not",
			srcs: map[string]string{"a.go": pkg + `
// List holds elements.
type List[E any] struct{}

func (l *List[E]) Len() int { return 0 }

type pair[K, V any] struct{}

func (p pair[K, V]) Len() int { return 0 }
`},
			want: []string{"a.go:7: method List.Len has no doc comment"},
		},
		{
			name: "a directive alone is not a doc comment",
			srcs: map[string]string{"a.go": pkg + `
//go:noinline
func Open() {}
`},
			want: []string{"a.go:5: func Open has no doc comment"},
		},
		{
			name: "const and var groups: a group comment, a spec comment or a line comment counts; wording unchecked",
			srcs: map[string]string{"a.go": pkg + `
// The element types.
const (
	F32 = iota
	F16
)

const (
	// BF16 is bfloat16.
	BF16 = 2
	I32 = 3 // 32-bit integers
	I64 = 4
	i8 = 5
)

var (
	Big = 1 // wording of a grouped comment is free
)
`},
			want: []string{"a.go:14: const I64 has no comment (nor its group)"},
		},
		{
			name: "single const with a doc comment not starting with its name",
			srcs: map[string]string{"a.go": pkg + `
// the largest rank.
const MaxRank = 8
`},
			want: []string{`a.go:5: const MaxRank's doc comment should start with its name: "MaxRank ..." (it starts "the largest rank.")`},
		},
		{
			name: "types in a group need their own comment; a group of one takes the group's",
			srcs: map[string]string{"a.go": pkg + `
// Shape is the extents.
type (
	Shape []int
)

// Types.
type (
	// DType is an element type.
	DType int
	Layout int
)
`},
			want: []string{"a.go:13: type Layout has no doc comment"},
		},
		{
			name: "members off: undocumented fields and interface methods pass",
			srcs: map[string]string{"a.go": pkg + `
// Args are a GEMM's arguments.
type Args struct {
	M, N int
}

// Backend runs ops.
type Backend interface {
	Gemm(a Args) error
}
`},
		},
		{
			name: "members on: exported fields and interface methods need a comment; embedded and unexported do not",
			opt:  Options{Members: true},
			srcs: map[string]string{"a.go": pkg + `
// Args are a GEMM's arguments.
type Args struct {
	M, N int // rows of A and columns of B
	// K is the inner dimension.
	K     int
	Alpha float32
	lda   int
	Base
}

// Base is embedded.
type Base struct{}

// Backend runs ops.
type Backend interface {
	// Gemm computes C = A·B.
	Gemm(a Args) error
	Sync() error
	Base2
}

// Base2 is an embedded interface.
type Base2 interface{ Close() error }

// Number is a type set, not a method set.
type Number interface{ ~float32 | ~float64 }

type args struct {
	Hidden int
}
`},
			want: []string{
				"a.go:9: field Args.Alpha has no comment",
				"a.go:21: method Backend.Sync has no comment",
				"a.go:26: method Base2.Close has no comment",
			},
		},
		{
			name: "members on: a run's doc comment documents the members it names, up to a blank line",
			opt:  Options{Members: true},
			srcs: map[string]string{"a.go": pkg + `
// Data names the files.
type Data struct {
	// Train, Eval and Test are data files.
	Train string
	Eval  string
	Test  string // a line comment does not end the run
	Dev   string

	Extra string
	// Evaluations counts evaluations.
	Evaluations int
	Eval2       int
	// Callbacks, one comment for the names declared together.
	OnBegin, OnEnd, OnLog func()
}

// Hooks are called around training.
type Hooks interface {
	// OnBegin and OnEnd bracket training.
	OnBegin() error
	OnEnd() error
	OnLog() error
}
`},
			want: []string{
				"a.go:10: field Data.Dev has no comment",
				"a.go:12: field Data.Extra has no comment",
				"a.go:15: field Data.Eval2 has no comment",
				"a.go:25: method Hooks.OnLog has no comment",
			},
		},
		{
			name: "package without a comment",
			srcs: map[string]string{"a.go": "package p\n\n// Open opens.\nfunc Open() {}\n"},
			want: []string{"a.go:1: package p has no package comment"},
		},
		{
			name: "package comment of the wrong form, and in two files",
			srcs: map[string]string{
				"a.go": "// This package does things.\npackage p\n",
				"b.go": "// Package p again.\npackage p\n",
			},
			want: []string{
				`a.go:2: package comment should start "Package p ..."`,
				"b.go:2: package p has its comment in more than one file (also in a.go); keep one",
			},
		},
		{
			name: "a command's comment may start with anything",
			srcs: map[string]string{"main.go": "// Tune fine-tunes models.\npackage main\n\nfunc main() {}\n"},
		},
		{
			name: "DocGo: the package comment must be in doc.go",
			opt:  Options{DocGo: true},
			srcs: map[string]string{"a.go": pkg},
			want: []string{"a.go:2: package p's comment should be in doc.go"},
		},
		{
			name: "DocGo: a comment in doc.go passes",
			opt:  Options{DocGo: true},
			srcs: map[string]string{"doc.go": pkg, "a.go": "package p\n"},
		},
		{
			name: "generated files and //go:build ignore files are skipped; other tags are checked",
			srcs: map[string]string{
				"doc.go":  pkg,
				"gen.go":  "// Code generated by x. DO NOT EDIT.\n\npackage p\n\nfunc Gen() {}\n",
				"tool.go": "//go:build ignore\n\npackage main\n\nfunc Tool() {}\n",
				"stub.go": "//go:build !cuda\n\npackage p\n\nfunc Open() {}\n",
			},
			want: []string{"stub.go:5: func Open has no doc comment"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := findings(t, tt.srcs, tt.opt)
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

// TestRun runs the command on a small tree: testdata, _dirs, -skip and _test.go files are left out, the
// findings go to stdout with their count on stderr, and the exit status says whether there were any.
func TestRun(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		path = filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good/doc.go", "// Package good is documented.\npackage good\n")
	write("good/good.go", "package good\n\n// Open opens.\nfunc Open() {}\n")
	write("good/good_test.go", "package good\n\nfunc Helper() {}\n")
	write("good/testdata/bad.go", "package bad\n\nfunc Bad() {}\n")
	write("_old/bad.go", "package bad\n\nfunc Bad() {}\n")
	write("vendored/bad.go", "package bad\n\nfunc Bad() {}\n")
	write("bad/doc.go", "// Package bad is documented.\npackage bad\n")
	write("bad/bad.go", "package bad\n\nfunc Bad() {}\n")
	write("broken/broken.go", "package broken\n\nfunc {\n")

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name:     "a clean package: exit 0, nothing printed",
			args:     []string{filepath.Join(root, "good")},
			wantCode: 0,
		},
		{
			name:       "a recursive pattern finds bad/ but not testdata, _old or a skipped directory",
			args:       []string{"-skip", filepath.Join(root, "vendored") + "," + filepath.Join(root, "broken"), root + "/..."},
			wantCode:   1,
			wantStdout: filepath.Join(root, "bad", "bad.go") + ":3:6: func Bad has no doc comment\n",
			wantStderr: "doccheck: 1 finding(s)\n",
		},
		{
			name:       "a file that does not parse is a usage error naming it",
			args:       []string{filepath.Join(root, "broken")},
			wantCode:   2,
			wantStderr: "doccheck: " + filepath.Join(root, "broken", "broken.go") + ":3:6",
		},
		{
			name:       "a missing directory is a usage error",
			args:       []string{filepath.Join(root, "nothere")},
			wantCode:   2,
			wantStderr: "doccheck: stat " + filepath.Join(root, "nothere"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.HasPrefix(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to start %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}
