package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tune-ml/tune/amp"
	"github.com/tune-ml/tune/tensor/cpu"
	"github.com/tune-ml/tune/transformer/llama"
)

// tinyDecoder is a Qwen2-shaped causal LM small enough for a unit test: V 64, C 32, 2 layers of 4 query and 2
// key/value heads of 8, I 48, q/k/v biases, tied embeddings.
func tinyDecoder(t *testing.T) *llama.Config {
	t.Helper()
	c, err := llama.NewConfig("qwen2", 64, 32, 48, 2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	c.TieWordEmbeddings, c.MaxPositionEmbeddings = true, 64
	return &c
}

func decoderSpec(t *testing.T, p amp.Policy, lora bool) Spec {
	s := DefaultSpec()
	s.Model, s.Decoder, s.Batch, s.Seq, s.Policy, s.Warmup, s.Steps = "tiny-qwen2", tinyDecoder(t), 2, 16, p, 1, 3
	if lora {
		c := s.LoRAFor(4, 0, []string{"all-linear"})
		s.LoRA = &c
	}
	return s
}

// TestDecoderRun trains a tiny causal LM for a few steps, fully and with LoRA on all-linear, with and without
// gradient checkpointing: the loss starts near ln V and falls, the CPU peak is exactly the memory plan's total,
// gradient checkpointing shrinks the activation arena, and LoRA trains only the adapters (CAUSAL_LM: no head in
// modules_to_save).
func TestDecoderRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy amp.Policy
		lora   bool
	}{
		{"fp32 full", amp.FP32, false},
		{"bf16 full", amp.BF16, false},
		{"bf16 LoRA all-linear", amp.BF16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var acts [2]int64
			for i, ckpt := range []bool{false, true} {
				s := decoderSpec(t, tc.policy, tc.lora)
				s.LearningRate, s.GradientCheckpointing = 1e-2, ckpt
				plan, err := Plan(cpu.New(), s)
				if err != nil {
					t.Fatal(err)
				}
				res, err := Run(context.Background(), cpu.New(), s)
				if err != nil {
					t.Fatal(err)
				}
				// The rotary cos/sin tables (F32, positions rounded up to a power of two, D/2 each) are allocated
				// by the first Forward, outside the arena.
				rope := int64(2 * 16 * 4 * 4)
				if res.PeakBytes != plan.Total()+rope {
					t.Errorf("checkpointing %v: peak %d bytes, plan total %d + rotary tables %d (%+v)", ckpt, res.PeakBytes, plan.Total(), rope, plan)
				}
				acts[i] = plan.Activations
				if math.Abs(res.LossFirst-math.Log(64)) > 0.5 || !(res.LossLast < res.LossFirst) {
					t.Errorf("loss %g → %g; want ≈ ln 64 = %.3f, falling", res.LossFirst, res.LossLast, math.Log(64))
				}
				wantTrain := res.Params
				if tc.lora {
					// every Linear of the 2 layers (q 32→32, k,v 32→16, o 32→32, gate/up 32→48, down 48→32), r 4
					wantTrain = 2 * 4 * int64((32+32)+2*(32+16)+(32+32)+2*(32+48)+(48+32))
				}
				if res.TrainableParams != wantTrain {
					t.Errorf("%d trainable parameters of %d, want %d", res.TrainableParams, res.Params, wantTrain)
				}
			}
			if acts[1] >= acts[0] {
				t.Errorf("activation arena %d bytes with gradient checkpointing, %d without", acts[1], acts[0])
			}
		})
	}
}

// TestDecoderFLOPs checks the count against the closed form: per token 6 FLOPs per decoder matmul weight
// (4 with LoRA's frozen bases) and per LM-head weight (4 when the tied embedding is frozen), causal attention
// 6·L·T·Hq·D per token (half of 12), and each adapter 6·r·(in + out) per token.
func TestDecoderFLOPs(t *testing.T) {
	for _, lora := range []bool{false, true} {
		s := decoderSpec(t, amp.BF16, lora)
		_, m, err := buildModel(cpu.New(), &s)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.countFLOPs(m)
		if err != nil {
			t.Fatal(err)
		}
		n, l, c, q, kv, inter, v := 2.0*16, 2.0, 32.0, 32.0, 16.0, 48.0, 64.0
		w := c*q + 2*c*kv + q*c + 3*c*inter
		per := 6.0
		want := 0.0
		if lora {
			per = 4
			want = 6 * n * l * 4 * ((c + q) + 2*(c+kv) + (q + c) + 2*(c+inter) + (inter + c))
		}
		want += per*n*l*w + per*n*c*v + 6*2*l*16*16*q
		if math.Abs(f.Total()-want) > 1e-6*want {
			t.Errorf("LoRA %v: %g FLOPs per step, want %g", lora, f.Total(), want)
		}
	}
}

// TestSetModel resolves names to BERT or decoder shapes, and a decoder config.json by its model_type.
func TestSetModel(t *testing.T) {
	s := DefaultSpec()
	if err := s.SetModel("smollm2-135m"); err != nil || s.Decoder == nil || s.Decoder.HiddenSize != 576 {
		t.Fatalf("smollm2-135m: %v, %+v", err, s.Decoder)
	}
	if err := s.SetModel("bert-base"); err != nil || s.Decoder != nil || s.Config.HiddenSize != 768 {
		t.Fatalf("bert-base: %v, decoder %v", err, s.Decoder)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	cfg := `{"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
		"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}`
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SetModel(path); err != nil || s.Decoder == nil || s.Decoder.NumKeyValueHeads != 2 {
		t.Fatalf("%s: %v, %+v", path, err, s.Decoder)
	}
	s.Seq = 100
	if err := s.Validate(); err == nil {
		t.Error("seq 100 beyond max_position_embeddings 64 was accepted")
	}
	if err := s.SetModel("gpt-7"); err == nil {
		t.Error("an unknown model name was accepted")
	}
}
