package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// keptLog is what a run resumed at step keeps of a metrics.jsonl, line by line: blank lines and entries after
// step go, everything else stays.
func keptLog(data []byte, step float64) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		var e struct {
			Step *float64 `json:"step"`
		}
		if len(bytes.TrimSpace(line)) == 0 || (json.Unmarshal(line, &e) == nil && e.Step != nil && *e.Step > step) {
			continue
		}
		out = append(out, line...)
	}
	return out
}

// TestResumedLogIsFilteredInPlace: a resume read metrics.jsonl whole and built the kept copy in memory (#26:
// memory followed the file). It now streams it: filtering a 32 MiB log grows the heap of a fresh process (this
// test run again as a child, so earlier tests' heap does not hide it; HeapSys never shrinks) by less than a
// quarter of the file. The result is the same, line for line: entries after the checkpoint's step, and blank
// lines, left out; other lines (not JSON, no step, longer than maxLogLine) kept.
func TestResumedLogIsFilteredInPlace(t *testing.T) {
	if os.Getenv("TUNE_TEST_FILTER_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestResumedLogIsFilteredInPlace$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TUNE_TEST_FILTER_CHILD=1", "GOGC=100", "GOMEMLIMIT=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	// Written a line at a time: a buffer of the file's size would grow the heap before it is measured.
	path := filepath.Join(dir, "input.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for s := 1; w.Size()+int(must(f.Seek(0, io.SeekCurrent))) < 32<<20; s++ {
		fmt.Fprintf(w, `{"epoch":%g,"grad_norm":0.5,"learning_rate":1e-05,"loss":0.25,"step":%d}`+"\n", float64(s)/1000, s%5000)
	}
	w.WriteString("\nnot json\n" + `{"eval_loss":1}` + "\n" + `{"note":"` + strings.Repeat("x", 200<<10) + `"}` + "\n")
	w.WriteString(`{"loss":0.1,"step":4999}` + "\n" + `{"loss":0.1,"step":5000}` + "\n\n" + `{"loss":0.1,"step":4000}`) // no final newline
	if err := w.Flush(); err != nil || f.Close() != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	size := int(fi.Size())
	steps := []int{4999, 4000}
	writers := make([]*jsonlWriter, len(steps))
	for i, step := range steps {
		writers[i] = newJSONLWriter(filepath.Join(dir, strconv.Itoa(step)))
		os.Mkdir(filepath.Dir(writers[i].path), 0o755)
		copyFile(t, path, writers[i].path)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if err := writers[i].OnTrainBegin(&Event{State: &TrainerState{GlobalStep: step}}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		if grew := int64(m1.HeapSys) - int64(m0.HeapSys); grew > int64(size/4) {
			t.Errorf("step %d: filtering a %d-byte log grew the heap by %d bytes", step, size, grew)
		}
	}
	data, _ := os.ReadFile(path) // the results, after the measures
	for i, step := range steps {
		got, _ := os.ReadFile(writers[i].path)
		if want := keptLog(data, float64(step)); !bytes.Equal(got, want) {
			t.Errorf("step %d: kept %d bytes, want %d", step, len(got), len(want))
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(writers[i].path), ".tmp-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// copyFile copies the file from to the path to, streaming.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
