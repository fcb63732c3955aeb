package trainer

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
)

// AllResultsName is the file in output_dir that collects every split's metrics, as transformers'
// Trainer.save_metrics writes it (combined=True).
const AllResultsName = "all_results.json"

// SaveMetrics writes metrics to output_dir/SPLIT_results.json ("train", "eval", "test") and merges them into
// output_dir/all_results.json, as transformers' Trainer.save_metrics does for the example scripts (run_glue
// writes train_results.json and eval_results.json): a JSON object with sorted keys and a four-space indent.
// Each file is replaced atomically.
func SaveMetrics(outputDir, split string, metrics map[string]float64) error {
	if err := writeResults(filepath.Join(outputDir, split+"_results.json"), metrics); err != nil {
		return err
	}
	all := map[string]float64{}
	path := filepath.Join(outputDir, AllResultsName)
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &all); err != nil {
			return fmt.Errorf("trainer: %s is not a JSON object of numbers (%v); remove it to start it afresh", path, err)
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("trainer: %w", err)
	}
	maps.Copy(all, metrics)
	if err := writeResults(path, all); err != nil {
		return err
	}
	return RecordOutputs(outputDir)
}

// writeResults writes metrics to path as JSON with sorted keys and a four-space indent (Python's
// json.dump(metrics, f, indent=4, sort_keys=True) in save_metrics).
func writeResults(path string, metrics map[string]float64) error {
	b, err := json.MarshalIndent(metrics, "", "    ")
	if err != nil {
		return fmt.Errorf("trainer: %s: %w", path, err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}
