package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trainWithCheckpoints runs the kill test's configuration (checkpoints at steps 2, 4 and 6) into a new
// output_dir and returns it.
func trainWithCheckpoints(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tr, _, _ := newTestTrainer(t, newBagModel(16, 4, 2, 0), killArgs(t, dir), toyTask(30, 16, 23), nil)
	mustTrain(t, tr)
	return dir
}

// TestCheckpointManifest: each checkpoint has a manifest listing its files; a checkpoint that lost its manifest
// (a kill in the middle of a rotation removes it first) or a file is incomplete: listed with its problem,
// never chosen by resume_from_checkpoint=true, refused when named; a file that changed is caught by the sums
// before anything loads.
func TestCheckpointManifest(t *testing.T) {
	dir := trainWithCheckpoints(t)
	all, err := ScanCheckpoints(dir)
	if err != nil || len(all) != 3 {
		t.Fatalf("ScanCheckpoints: %v, %v", all, err)
	}
	for _, c := range all {
		if c.Problem != "" {
			t.Fatalf("%s: %s", c.Dir, c.Problem)
		}
		if err := VerifyCheckpoint(c.Dir); err != nil {
			t.Fatal(err)
		}
	}
	ck4, ck6 := filepath.Join(dir, "checkpoint-4"), filepath.Join(dir, "checkpoint-6")

	// A rotation killed half-way: the manifest and some files gone.
	os.Remove(filepath.Join(ck6, ManifestName))
	os.Remove(filepath.Join(ck6, OptimizerName))
	// A file missing under a manifest (deleted by hand).
	os.Remove(filepath.Join(ck4, RNGStateName))
	cps, _ := Checkpoints(dir)
	if len(cps) != 1 || filepath.Base(cps[0]) != "checkpoint-2" {
		t.Fatalf("complete checkpoints %v, want only checkpoint-2", cps)
	}
	all, _ = ScanCheckpoints(dir)
	if !strings.Contains(all[1].Problem, RNGStateName+" is missing") || !strings.Contains(all[2].Problem, "no "+ManifestName) {
		t.Fatalf("problems: %q, %q", all[1].Problem, all[2].Problem)
	}
	if got, err := ResolveCheckpoint(dir, "true"); err != nil || got != filepath.Join(dir, "checkpoint-2") {
		t.Fatalf("ResolveCheckpoint(true) = %s, %v; want checkpoint-2", got, err)
	}
	if _, err := ResolveCheckpoint(dir, ck4); err == nil || !strings.Contains(err.Error(), "is not a complete checkpoint: "+RNGStateName+" is missing") {
		t.Fatalf("ResolveCheckpoint(checkpoint-4): %v", err)
	}

	// A resume from true continues from checkpoint-2 and warns about the other two.
	a := killArgs(t, dir)
	a.ResumeFromCheckpoint = "true"
	tr, _, logs := newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 23), nil)
	mustTrain(t, tr)
	for _, want := range []string{"resuming from " + filepath.Join(dir, "checkpoint-2"), "incomplete checkpoint, ignored", "checkpoint-6"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}

	// A file of the same size whose bytes changed: refused by the sums before anything loads.
	dir = trainWithCheckpoints(t)
	p := filepath.Join(dir, "checkpoint-6", OptimizerName)
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	a = killArgs(t, dir)
	a.ResumeFromCheckpoint = "true"
	tr, _, _ = newTestTrainer(t, newBagModel(16, 4, 2, 0), a, toyTask(30, 16, 23), nil)
	if _, err := tr.Train(t.Context()); err == nil || !strings.Contains(err.Error(), OptimizerName+"'s SHA-256 is") {
		t.Fatalf("resume from a changed checkpoint: %v", err)
	}
}

// TestRemoveStaleTempsRestoresReplaced: a kill between ReplaceDir's two renames leaves checkpoint-N moved aside
// as a temporary ".old" directory and no checkpoint-N; the next run moves it back rather than deleting it.
func TestRemoveStaleTempsRestoresReplaced(t *testing.T) {
	dir := trainWithCheckpoints(t)
	ck := filepath.Join(dir, "checkpoint-4")
	aside := filepath.Join(dir, tmpPrefix+"checkpoint-4-123456.old")
	if err := os.Rename(ck, aside); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, tmpPrefix+"checkpoint-6-999"), 0o700) // a save in progress: removed
	removeStaleTemps(dir)
	if err := VerifyCheckpoint(ck); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("%s left behind", e.Name())
		}
	}
}
