package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/badinput"
	"github.com/tune-ml/tune/internal/smallfile"
)

// ManifestName is the file a checkpoint directory is complete with: the list of its other files with their
// sizes and SHA-256 sums, written last (inside the temporary directory, before the rename that publishes it)
// and removed first when the checkpoint is rotated away. A checkpoint-N folder without a manifest that matches
// its files is incomplete: listed as such, never chosen by resume_from_checkpoint=true, refused when named.
const ManifestName = "checkpoint_manifest.json"

// manifestFormat identifies tune's manifest.
const manifestFormat = "tune-checkpoint-manifest-v1"

// Manifest is the content of ManifestName.
type Manifest struct {
	Format string         `json:"format"` // "tune-checkpoint-manifest-v1"
	Files  []ManifestFile `json:"files"`  // every other regular file of the directory, sorted by name
}

// ManifestFile is one file of a checkpoint.
type ManifestFile struct {
	Name   string `json:"name"`   // the file's name inside the checkpoint directory
	Size   int64  `json:"size"`   // its size in bytes
	SHA256 string `json:"sha256"` // its SHA-256, lower-case hex
}

// WriteCheckpointManifest lists the regular files of dir (sizes and SHA-256) in dir/ManifestName, atomically.
// The Trainer calls it last when it saves a checkpoint; a checkpoint assembled by other means is complete once
// it has been called.
func WriteCheckpointManifest(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	m := Manifest{Format: manifestFormat, Files: []ManifestFile{}}
	for _, e := range ents {
		if e.Name() == ManifestName || !e.Type().IsRegular() {
			continue
		}
		size, sum, err := fileSum(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		m.Files = append(m.Files, ManifestFile{Name: e.Name(), Size: size, SHA256: sum})
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestName), append(data, '\n'), 0o644)
}

// fileSum returns a file's size and SHA-256.
func fileSum(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// readManifest reads and checks dir's manifest against the directory: every file listed is present with its
// size, and, with sums, its SHA-256. The error says what is missing or wrong.
func readManifest(dir string, sums bool) error {
	data, err := smallfile.Read(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no %s (a save or a rotation was interrupted, or an older tune wrote it)", ManifestName)
	}
	if err != nil {
		return err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Format != manifestFormat {
		return fmt.Errorf("%s is not a tune checkpoint manifest", ManifestName)
	}
	for _, f := range m.Files {
		if f.Name == "" || f.Name != filepath.Base(f.Name) || f.Name == "." || f.Name == ".." {
			return fmt.Errorf("%s lists the file %q, which is not a plain name", ManifestName, f.Name)
		}
		p := filepath.Join(dir, f.Name)
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return fmt.Errorf("%s is missing", f.Name)
		case st.Size() != f.Size:
			return fmt.Errorf("%s has %d bytes, the manifest says %d", f.Name, st.Size(), f.Size)
		}
		if sums {
			if _, sum, err := fileSum(p); err != nil {
				return err
			} else if sum != f.SHA256 {
				return fmt.Errorf("%s's SHA-256 is %s, the manifest says %s (the file changed or is corrupt)", f.Name, sum, f.SHA256)
			}
		}
	}
	if !slices.ContainsFunc(m.Files, func(f ManifestFile) bool { return f.Name == TrainerStateName }) {
		return fmt.Errorf("%s does not list %s", ManifestName, TrainerStateName)
	}
	return nil
}

// VerifyCheckpoint checks that dir is a complete checkpoint: its manifest is there and every file it lists has
// its size and SHA-256. Resuming calls it before anything is loaded. A checkpoint found incomplete or changed is
// bad input (internal/badinput: the run must resume from another); a file that cannot be read is not.
func VerifyCheckpoint(dir string) error {
	if err := readManifest(dir, true); err != nil {
		return badinput.Errorf("trainer: %s is not a complete checkpoint: %w", dir, err)
	}
	return nil
}

// CheckpointInfo is a checkpoint-N folder of an output_dir, as ScanCheckpoints finds it.
type CheckpointInfo struct {
	Dir  string // the folder
	Step int    // N
	// Problem is empty for a complete checkpoint (its manifest is there and every file it lists has its size),
	// else what makes it incomplete.
	Problem string
}

// ScanCheckpoints returns the checkpoint-N folders of outputDir, complete or not, sorted by step. Sizes are
// checked against the manifest; sums only by VerifyCheckpoint.
func ScanCheckpoints(outputDir string) ([]CheckpointInfo, error) {
	ents, err := os.ReadDir(outputDir)
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	var out []CheckpointInfo
	for _, e := range ents {
		if !e.IsDir() || !IsCheckpointDir(e.Name()) {
			continue
		}
		step, err := strconv.Atoi(strings.TrimPrefix(e.Name(), CheckpointPrefix))
		if err != nil {
			continue
		}
		c := CheckpointInfo{Dir: filepath.Join(outputDir, e.Name()), Step: step}
		if err := readManifest(c.Dir, false); err != nil {
			c.Problem = err.Error()
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b CheckpointInfo) int { return a.Step - b.Step })
	return out, nil
}
