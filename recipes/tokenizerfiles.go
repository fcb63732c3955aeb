package recipes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
	"github.com/tune-ml/tune/internal/smallfile"
	"github.com/tune-ml/tune/trainer"
)

// tokenizerFiles are the files that make up a Hugging Face tokenizer directory: the tokenizer itself
// (tokenizer.json, or the WordPiece vocab.txt; loaders.LoadTokenizer prefers tokenizer.json) and the settings
// transformers reads beside it.
var tokenizerFiles = []string{"tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"}

// CopyTokenizer copies the tokenizer that src names (a directory, or a tokenizer.json / vocab.txt file) into
// dir, byte for byte, so a saved model directory is complete: from a directory every file of tokenizerFiles it
// holds; from a file that file, as tokenizer.json (a .json file) or vocab.txt, and the settings files beside it,
// so dir loads the tokenizer that was used even when the file's directory also holds the other kind. A file
// dir already holds is replaced only when it differs. It fails, naming src, when src holds no tokenizer
// (neither tokenizer.json nor vocab.txt) or a file of it cannot be read: dir would otherwise lack the
// tokenizer its caller reports. Errors carry no package prefix; the caller adds its context. tune finetune and merge use it, and
// Run.SaveModel.
func CopyTokenizer(src, dir string) error {
	type file struct{ from, name string }
	var files []file
	if st, err := os.Stat(src); err != nil {
		return fmt.Errorf("the tokenizer %s: %w", src, err)
	} else if st.IsDir() {
		for _, name := range tokenizerFiles {
			files = append(files, file{filepath.Join(src, name), name})
		}
	} else {
		name := "vocab.txt"
		if strings.EqualFold(filepath.Ext(src), ".json") {
			name = "tokenizer.json"
		}
		files = append(files, file{src, name})
		for _, n := range tokenizerFiles[2:] {
			files = append(files, file{filepath.Join(filepath.Dir(src), n), n})
		}
	}
	found := false // tokenizer.json or vocab.txt was copied
	for _, f := range files {
		data, err := smallfile.ReadCapped(f.from, smallfile.MaxTokenizerBytes, "a tokenizer file")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the tokenizer file %s: %w", f.from, err)
		}
		found = found || f.name == "tokenizer.json" || f.name == "vocab.txt"
		dst := filepath.Join(dir, f.name)
		if old, err := smallfile.ReadCapped(dst, smallfile.MaxTokenizerBytes, "a tokenizer file"); err == nil && string(old) == string(data) {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("copying the tokenizer file %s: writing %s: %w", f.from, dst, err)
		}
		if err := atomicfile.WriteFile(dst, data, 0o644); err != nil {
			return fmt.Errorf("copying the tokenizer file %s: %w", f.from, err)
		}
	}
	if !found {
		return fmt.Errorf("the tokenizer %s holds neither tokenizer.json nor vocab.txt: nothing to copy into %s", src, dir)
	}
	return nil
}

// SaveModel writes what tune finetune leaves in a model directory: the trained model (config.json and
// model.safetensors, or the PEFT adapter; Trainer.SaveModel) and the tokenizer files (CopyTokenizer from the
// recipe's tokenizer.path), so that tune eval, tune predict and transformers' from_pretrained load dir as it is.
// Trainer.SaveModel alone writes no tokenizer.
func (run *Run) SaveModel(dir string) error {
	if err := run.Trainer.SaveModel(dir); err != nil {
		return err
	}
	if err := CopyTokenizer(run.Recipe.Tokenizer.Path, dir); err != nil {
		return fmt.Errorf("recipes: saving the tokenizer into %s: %w", dir, err)
	}
	return trainer.RecordOutputs(dir) // the tokenizer files too, in the run's record of its outputs
}
