// Command gemmtable turns the output of `tune bench --gemm-algos all` (the "TABLE {json}" lines cuda.SurveyGemms
// writes, one per GEMM shape) into cuda/gemmtable.json, the fixed table of cuBLASLt algorithms the CUDA backend
// uses instead of heuristic result #0 (cuda/gemmtable.go).
//
//	tune-cuda bench --device cuda --model bert-base --batch 32 --seq 128 --modes bf16,fp16 --steps 2 --warmup 1 --gemm-algos all > s1.txt
//	go run ./tools/gemmtable s1.txt s2.txt ... > cuda/gemmtable.json
//
// A shape gets a row when the survey's best deterministic configuration within tolerance beats heuristic #0 by
// at least -min-gain (default 3%) and cublasLtMatmulAlgoInit plus the configuration attributes rebuild it (the
// survey's "rebuilt" field: the same bytes, or the same bits). When one shape was surveyed more than once
// (different pointer alignments, or several files), the row from the least aligned pointers wins (its algorithm
// needs no more alignment than the others'), then the larger gain. -keep cuda/gemmtable.json keeps the rows of
// the existing table whose key the surveys give no row for (a LoRA survey with --gemm-algos-min-dim 1 adds the
// rank-r products to the full fine-tuning rows).
package main
