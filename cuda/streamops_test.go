package cuda_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// streamCallers are the functions allowed to queue stream operations (async memsets and copies, cgo kernel
// launches) by calling the driver directly, each because it passes the call through op.stream / op.issue
// (graph.go) itself or runs only outside a captured or replayed step. Any other direct call would be issued
// for real while a CUDA graph replay re-runs the step's host code to compare its operations, racing with the
// replay in flight (session 4, d3: a direct cuMemsetD32Async in EmbeddingBackward zeroed the counts of the
// device-planned scatter under a running replay: CUDA_ERROR_ILLEGAL_ADDRESS with --cuda-graphs).
var streamCallers = map[string]bool{
	"graph.go:hostToDevice":          true, // the eager path, and the closure it gives issue
	"staging.go:stageUpload":         true, // eager only (hostToDevice calls it when no graph is active)
	"memory.go:Alloc":                true, // the zero fill, inside o.stream
	"memory.go:toHost":               true, // Download's read: it waits for the device, which a captured step cannot do
	"graph.go:launchLocked":          true, // the graph launch itself, and the uploads into its slots before it
	"graph.go:issue":                 true, // the captured copy out of an upload's slot (capturing only)
	"memory.go:copyDD":               true, // inside o.stream
	"memory.go:Fill":                 true, // inside o.stream
	"optim.go:memset32":              true, // inside o.stream
	"attention.go:attnLaunch":        true, // through o.issue when a graph is active
	"attention_f32.go:f32LaunchBlob": true, // the same
	"gemmsurvey.go:surveyOne":        true, // SurveyGemms runs only eagerly (it refuses while a step graph is active)
	"gemmsurvey.go:diff":             true, // the same
	"gemmsurvey.go:fillPattern":      true, // the same
}

// TestStreamOpsGoThroughTheRecorder finds every direct driver call that queues work on the stream in the
// package's sources and checks that it stands in one of streamCallers.
func TestStreamOpsGoThroughTheRecorder(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !queues(pkg.Name, sel.Sel.Name) {
					return true
				}
				found++
				if where := name + ":" + fn.Name.Name; !streamCallers[where] {
					t.Errorf("%s: %s calls %s.%s directly: queue it through op.stream or op.issue (graph.go), "+
						"or add the function to streamCallers saying why it is safe", fset.Position(call.Pos()), where, pkg.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Fatal("no direct stream calls found: the test no longer sees the package's sources")
	}
}

// queues reports whether pkg.fn queues work on a stream: gorgonia.org/cu's Memset*/Memcpy*Async, or a cgo
// tc_*launch helper.
func queues(pkg, fn string) bool {
	switch pkg {
	case "cu":
		return (strings.HasPrefix(fn, "Memset") || strings.HasPrefix(fn, "Memcpy")) && strings.HasSuffix(fn, "Async")
	case "C":
		return strings.HasPrefix(fn, "tc_") && strings.HasSuffix(fn, "launch")
	}
	return false
}
