package lora

import (
	"os"
	"testing"
)

// FuzzParseAdapterConfig parses arbitrary adapter_config.json contents: nothing panics, and a config it accepts
// passes Validate. `make fuzz` and .ci/run run it.
//
//	go test ./lora -run '^$' -fuzz '^FuzzParseAdapterConfig$' -fuzztime 60s
func FuzzParseAdapterConfig(f *testing.F) {
	for _, p := range []string{"../testdata/lora/peft_adapter/adapter_config.json",
		"../testdata/lora/saved_by_tune/basic/adapter_config.json", "../testdata/lora/saved_by_tune/extended/adapter_config.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"peft_type": "LORA", "r": 0}`,
		`{"peft_type": "LORA", "r": 1e30, "lora_alpha": -1}`,
		`{"peft_type": "LORA", "target_modules": ".*"}`,
		`{"peft_type": "LORA", "target_modules": ["query", null]}`,
		`{"peft_type": "LORA", "use_dora": true}`,
		`{"peft_type": "LORA", "rank_pattern": {"q": 4}}`,
		`{"peft_type": "lora"}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := ParseAdapterConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted a config that Validate refuses: %v", err)
		}
	})
}
