package loaders

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tune-ml/tune/internal/atomicfile"
)

// WriteCheckpoint writes tensors into dir as transformers' save_pretrained(max_shard_size=maxShardBytes) does:
// model.safetensors when everything fits in one shard (maxShardBytes ≤ 0 means no limit), else
// model-00001-of-0000N.safetensors shards of at most maxShardBytes of tensor data each (filled in order; a
// tensor larger than the limit gets a shard of its own) and model.safetensors.index.json with metadata
// total_size (bytes of tensor data) and total_parameters, and the weight_map. Files of the other layout that
// an earlier save left in dir (model.safetensors, or an index and the shards it names) are removed after the new
// files are in place, so OpenCheckpoint reads the new weights. It returns the files written.
func WriteCheckpoint(dir string, tensors []HostTensor, maxShardBytes int64) ([]string, error) {
	var shards [][]HostTensor
	var size, params, cur int64
	for _, t := range tensors {
		n := int64(len(t.Data))
		size += n
		params += int64(t.NumElements())
		if len(shards) == 0 || (maxShardBytes > 0 && cur+n > maxShardBytes && cur > 0) {
			shards = append(shards, nil)
			cur = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
		cur += n
	}
	if len(shards) <= 1 {
		path := filepath.Join(dir, SafetensorsWeightsName)
		if err := WriteSafetensors(path, tensors, nil); err != nil {
			return nil, err
		}
		removeShards(dir)
		return []string{path}, nil
	}
	written := []string{}
	weightMap := map[string]string{}
	for i, sh := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		path := filepath.Join(dir, name)
		if err := WriteSafetensors(path, sh, nil); err != nil {
			return written, err
		}
		written = append(written, path)
		for _, t := range sh {
			weightMap[t.Name] = name
		}
	}
	old := oldShards(dir)
	index := map[string]any{
		"metadata":   map[string]int64{"total_size": size, "total_parameters": params},
		"weight_map": weightMap,
	}
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return written, err
	}
	ixPath := filepath.Join(dir, SafetensorsIndexName)
	if err := atomicfile.WriteFile(ixPath, append(data, '\n'), 0o644); err != nil {
		return written, fmt.Errorf("loaders: writing %s: %w", ixPath, err)
	}
	written = append(written, ixPath)
	os.Remove(filepath.Join(dir, SafetensorsWeightsName))
	for _, f := range old {
		if _, ok := inValues(weightMap, f); !ok {
			os.Remove(filepath.Join(dir, f))
		}
	}
	return written, nil
}

// oldShards returns the shard files an existing index in dir names.
func oldShards(dir string) []string {
	ix, err := ReadShardIndex(filepath.Join(dir, SafetensorsIndexName))
	if err != nil {
		return nil
	}
	return ix.Shards()
}

// removeShards removes an index in dir and the shards it names (after a single-file save).
func removeShards(dir string) {
	for _, f := range oldShards(dir) {
		if strings.HasSuffix(f, ".safetensors") {
			os.Remove(filepath.Join(dir, f))
		}
	}
	os.Remove(filepath.Join(dir, SafetensorsIndexName))
}

func inValues(m map[string]string, v string) (string, bool) {
	for k, x := range m {
		if x == v {
			return k, true
		}
	}
	return "", false
}
