// Command tune fine-tunes Transformer models (fully or with LoRA adapters) in FP32, FP16 or BF16 mixed
// precision. Run `tune --help` for the commands.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
