package cuda

import "time"

// GemmSurveyOptions configures SurveyGemms.
type GemmSurveyOptions struct {
	Heuristics int           // heuristic results requested per GEMM (default 32)
	Enumerate  bool          // also try every algorithm ID × tile × stages × swizzle × split-K the library offers
	Budget     time.Duration // time spent timing enumerated candidates per GEMM (default 0.8 s; half as long again goes to collecting them)
	MinDim     int           // skip GEMMs with M, N or K at most this (default 64: the thin LoRA products)
	Top        int           // candidates listed per GEMM (default 6)
}
