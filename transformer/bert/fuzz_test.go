package bert

import (
	"os"
	"testing"

	"github.com/tune-ml/tune/loaders"
)

// FuzzBertConfig reads arbitrary config.json contents as a checkpoint's config is read (loaders.ParseBertConfig,
// then BertConfigFromHF with its validation): nothing panics, and a config that passes has a whole head size
// and a positive parameter count whose size check does not panic. `make fuzz` and .ci/run run it.
//
//	go test ./transformer/bert -run '^$' -fuzz '^FuzzBertConfig$' -fuzztime 60s
func FuzzBertConfig(f *testing.F) {
	for _, p := range []string{"../../testdata/lora/merged_by_tune/config.json", "../../testdata/safetensors/bert-mlm-tied/config.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"vocab_size": 1e30, "hidden_size": -1, "id2label": {"0": "a", "7": "b"}, "num_labels": 3}`))
	f.Add([]byte(`{"label2id": {"a": 0, "b": 0}, "id2label": {"0": "a", "1": "b"}}`))
	f.Add([]byte(`{"num_labels": 2147483647}`))
	f.Add([]byte(`{"hidden_size": 768, "num_attention_heads": 0}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := loaders.ParseBertConfig("config.json", data)
		if err != nil {
			return
		}
		c, err := BertConfigFromHF(h)
		if err != nil {
			return
		}
		if c.NumAttentionHeads <= 0 || c.HiddenSize%c.NumAttentionHeads != 0 || c.NumParameters() <= 0 {
			t.Fatalf("accepted config %+v", c)
		}
		_ = c.CheckSize()
	})
}
