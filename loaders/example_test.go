package loaders_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tune-ml/tune/loaders"
	"github.com/tune-ml/tune/tensor"
)

// The checkpoint flow of the package tour on a 2-layer BERT fixture: open, read the config, match the names,
// copy a tensor out.
func Example_checkpoint() {
	dir := filepath.Join("..", "testdata", "safetensors", "bert-tiny")
	ckpt, err := loaders.OpenCheckpoint(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ckpt.Close()
	cfg, err := loaders.ReadBertConfig(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	want := loaders.BertSequenceClassificationTensors(cfg)
	source, report := loaders.MapBertCheckpoint(want, ckpt.Infos(), cfg)
	if err := report.Err(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(want), "tensors expected,", report.Matched, "matched; labels", cfg.ID2Label)

	spec := want[len(want)-2] // classifier.weight
	t, err := ckpt.Get(source[spec.Name])
	if err != nil {
		fmt.Println(err)
		return
	}
	dst := make([]float32, t.NumElements())
	if err := t.Float32Into(dst); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Name, spec.Shape, t.DType, len(dst))
	// Output:
	// 41 tensors expected, 41 matched; labels map[0:NEG 1:NEU 2:POS]
	// classifier.weight [3 8] F32 24
}

// WriteSafetensors writes host tensors in the reference layout; OpenCheckpoint reads them back.
func ExampleWriteSafetensors() {
	dir, err := os.MkdirTemp("", "loaders-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	w, _ := loaders.NewHostTensor("dense.weight", tensor.BF16, []int{2, 2}, []float32{1, 0.1, -2, 3})
	b, _ := loaders.NewHostTensor("dense.bias", tensor.F32, []int{2}, []float32{0.5, -0.5})
	path := filepath.Join(dir, "model.safetensors")
	if err := loaders.WriteSafetensors(path, []loaders.HostTensor{w, b}, nil); err != nil {
		fmt.Println(err)
		return
	}
	ckpt, err := loaders.OpenCheckpoint(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ckpt.Close()
	got, _ := ckpt.Get("dense.weight")
	vals, _ := got.Float32()
	fmt.Println(ckpt.Names(), ckpt.Metadata(), got.DType, vals)
	// Output: [dense.bias dense.weight] map[format:pt] BF16 [1 0.100097656 -2 3]
}

// The tokenizer and data flow of the package tour on tune's tiny embedded dataset: encode a sentence, then load
// a TSV file and collate the first batch of a shuffled epoch.
func Example_data() {
	tiny := filepath.Join("..", "recipes", "data", "tiny")
	tok, err := loaders.LoadTokenizer(tiny)
	if err != nil {
		fmt.Println(err)
		return
	}
	enc, err := tok.Encode("The music was moving.", loaders.EncodeOptions{MaxLength: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(enc.Tokens, enc.AttentionMask)

	ds, err := loaders.LoadDataset(filepath.Join(tiny, "dev.tsv"), loaders.DatasetOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	coll, err := loaders.NewCollator(tok, ds, loaders.CollatorOptions{MaxLength: 64, PadToMultipleOf: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	order, err := loaders.EpochOrder(ds.Len(), 0, loaders.SamplerOptions{Shuffle: true, Seed: 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	batches := loaders.Batches(order, 32, false)
	b, err := coll.Collate(batches[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ds.Len(), "examples,", len(batches), "batches; the first is", b.B, "×", b.T, "with",
		len(b.Labels), "labels and a last of", len(batches[len(batches)-1]))
	// Output:
	// [[CLS] the music was moving . [SEP]] [1 1 1 1 1 1 1]
	// 500 examples, 16 batches; the first is 32 × 16 with 32 labels and a last of 20
}
