package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/recipes"
)

func init() { register(newCpCmd) }

// cpOptions holds `tune cp`'s flags and arguments.
type cpOptions struct {
	Name  string // an embedded recipe's name
	Dest  string // a file, or a directory (existing, or ending in "/") to copy into as NAME.yaml
	Force bool   // --force: overwrite existing files
}

func newCpCmd() *cobra.Command {
	o := &cpOptions{}
	cmd := &cobra.Command{
		Use:   "cp NAME DEST",
		Short: "Copy an embedded recipe to a file to edit",
		Long: `cp writes the embedded recipe NAME (see tune ls) to DEST, a file name or a directory: an existing one, or
one ending in "/", which is created inside an existing folder (the copy is then DEST/NAME.yaml), so you can
edit it and run it with tune finetune. As with cp(1), the folder DEST goes into must exist. When the recipe
reads data embedded in tune (the tiny recipe does), that data is copied beside it too, keeping the relative
paths working; paths to files tune does not embed (a checkpoint, SST-2) are copied as written, and cp says
which keys to edit or override.

cp never overwrites a file that differs from what it would write, unless --force is given; it checks every
destination before writing any. Each file is written to a temporary name and renamed into place.`,
		Example: `  tune cp tiny my-tiny.yaml
  tune cp bert experiments/
  tune cp --force bert my-bert.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("cp needs NAME and DEST, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Dest = args[0], args[1]
			return o.run(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "overwrite existing files")
	return cmd
}

// cpFile is one file cp writes.
type cpFile struct {
	path string
	data []byte
}

func (o *cpOptions) run(w io.Writer) error {
	name := strings.TrimSuffix(o.Name, ".yaml")
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		hint := "copy a file with cp(1)"
		if _, err := recipes.Lookup(filepath.Base(name)); err == nil {
			hint = fmt.Sprintf("to copy the embedded %s recipe write: tune cp %s %s", filepath.Base(name), filepath.Base(name), o.Dest)
		}
		return usagef("cp copies an embedded recipe by its name (tune ls lists them); %s is a path: %s", o.Name, hint)
	}
	text, err := recipes.Lookup(name)
	if err != nil {
		return usageError{err}
	}
	dest := o.Dest
	if strings.TrimSpace(dest) == "" {
		return usagef("cp: DEST is empty: give a file name such as my-%s.yaml, or a folder", name)
	}
	if intoDir(dest) {
		dest = filepath.Join(dest, name+".yaml")
	}
	if err := checkDestFolder(dest, o.Dest); err != nil {
		return err
	}
	files := []cpFile{{dest, text}}
	data, err := recipes.EmbeddedFiles(name)
	if err != nil {
		return err
	}
	for _, f := range data {
		b, err := recipes.ReadEmbedded(f)
		if err != nil {
			return err
		}
		files = append(files, cpFile{filepath.Join(filepath.Dir(dest), filepath.FromSlash(f)), b})
	}
	// Check every destination before writing any, so a refusal leaves nothing half-copied.
	var write []cpFile
	for _, f := range files {
		// Only a regular file is compared and replaced: reading a named pipe would block, and renaming over a
		// device or socket (/dev/null with --force, as root) would replace that node with the recipe.
		if st, err := os.Stat(f.path); err == nil && !st.Mode().IsRegular() {
			return usagef("%s is not a regular file (%s): cp writes a recipe file; name a new file or a folder", f.path, smallfile.Kind(st.Mode()))
		}
		old, err := os.ReadFile(f.path)
		switch {
		case err == nil && bytes.Equal(old, f.data):
			continue // already there, identical
		case err == nil && !o.Force:
			return usagef("%s exists and differs from the embedded %s; use --force to overwrite it", f.path, name)
		case err != nil && !os.IsNotExist(err):
			return fmt.Errorf("cp: %w", err)
		}
		write = append(write, f)
	}
	for _, f := range write {
		if err := writeAtomic(f.path, f.data); err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		fmt.Fprintf(w, "wrote %s\n", f.path)
	}
	if len(write) == 0 {
		fmt.Fprintf(w, "%s is already a copy of %s\n", dest, name)
	}
	for _, info := range recipes.List() {
		if info.Name == name && len(info.Needs) > 0 {
			kv := make([]string, len(info.Needs))
			for i, k := range info.Needs {
				kv[i] = k + "=" + placeholder(k)
			}
			fmt.Fprintf(w, "note: %s names %s by paths relative to the recipes/ folder of tune's source tree, which tune "+
				"does not embed: edit them in %s, or give them when you run it: tune finetune %s %s\n",
				dest, strings.Join(info.Needs, ", "), dest, dest, strings.Join(kv, " "))
		}
	}
	return nil
}

// placeholder is what an input key takes in a usage line: FILE for data, DIR for a model or tokenizer.
func placeholder(key string) string {
	if strings.HasPrefix(key, "data.") {
		return "FILE"
	}
	return "DIR"
}

// checkDestFolder refuses a copy whose folder does not exist, as cp(1) does, so that a mistyped DEST does not
// create folders in unexpected places; a DEST ending in a slash is a folder to create, inside an existing one.
func checkDestFolder(dest, given string) error {
	dir := filepath.Dir(dest)
	if strings.HasSuffix(given, "/") || strings.HasSuffix(given, string(filepath.Separator)) {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return nil
		}
		dir = filepath.Dir(dir) // DEST/ itself is created
	}
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		return nil
	case err == nil:
		return usagef("cannot copy into %s: %s is a file, not a folder", given, dir)
	case errors.Is(err, fs.ErrNotExist):
		return usagef("cannot copy into %s: there is no folder %s; create it first (mkdir -p %s) or name an existing folder", given, dir, dir)
	}
	return fmt.Errorf("cp: %w", err)
}

// intoDir reports whether cp's DEST names a directory to copy into: one ending in a path separator (created
// when missing) or an existing directory.
func intoDir(dest string) bool {
	if strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, string(filepath.Separator)) {
		return true
	}
	st, err := os.Stat(dest)
	return err == nil && st.IsDir()
}

// writeAtomic writes data to path (mode 0644) through a temporary file in the same directory and a rename
// (atomicfile.WriteFile), creating the directory if needed, so path never holds a partial file. Its errors name
// the path and carry no prefix: cp and copyTokenizer each add their own.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, data, 0o644)
}
