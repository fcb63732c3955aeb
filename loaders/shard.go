package loaders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/tune-ml/tune/internal/jsonerr"
	"github.com/tune-ml/tune/internal/smallfile"
)

// SafetensorsIndexName is the index file of a sharded checkpoint, as transformers' save_pretrained names it.
const SafetensorsIndexName = "model.safetensors.index.json"

// ShardIndex is a model.safetensors.index.json: which shard file holds each tensor, and the totals transformers
// records. Older files carry only total_size.
type ShardIndex struct {
	Path            string            // the index file
	TotalSize       int64             // metadata.total_size: bytes of tensor data over all shards; 0 when absent
	TotalParameters int64             // metadata.total_parameters (transformers v5); 0 when absent
	WeightMap       map[string]string // tensor name → shard file name (relative to the index's directory)
}

// ReadShardIndex reads and checks a model.safetensors.index.json: it must hold a non-empty "weight_map" of tensor
// names to shard file names, each a plain file name in the index's directory (no path separators or ".."),
// and "metadata" numbers, where present, must be non-negative integers.
func ReadShardIndex(path string) (*ShardIndex, error) {
	data, err := smallfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("loaders: %w", err)
	}
	var raw struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap map[string]string          `json:"weight_map"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("loaders: %w", jsonerr.Wrap(path, data, err))
	}
	if len(raw.WeightMap) == 0 {
		return nil, fmt.Errorf("loaders: %s: no \"weight_map\" (or it is empty): not a sharded safetensors index", path)
	}
	ix := &ShardIndex{Path: path, WeightMap: raw.WeightMap}
	for key, dst := range map[string]*int64{"total_size": &ix.TotalSize, "total_parameters": &ix.TotalParameters} {
		v, ok := raw.Metadata[key]
		if !ok || string(v) == "null" {
			continue
		}
		if *dst, err = parseCount(v); err != nil {
			return nil, fmt.Errorf("loaders: %s: metadata.%s: %w", path, key, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw.WeightMap)) { // sorted: the same tensor named on every run
		shard := raw.WeightMap[name]
		if shard == "" || shard == "." || shard == ".." || filepath.Base(shard) != shard {
			return nil, fmt.Errorf("loaders: %s: tensor %q maps to %q, which is not a file name in the index's directory", path, name, shard)
		}
	}
	return ix, nil
}

// parseCount parses a non-negative integer that may be written as a JSON integer or an integral float (1.5e9).
func parseCount(v json.RawMessage) (int64, error) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f != float64(int64(f)) {
		return 0, fmt.Errorf("%s is not a non-negative integer", v)
	}
	return int64(f), nil
}

// Shards returns the shard file names in sorted order, each once.
func (ix *ShardIndex) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ix.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// tensorsIn returns the tensor names the index places in shard, sorted.
func (ix *ShardIndex) tensorsIn(shard string) []string {
	var out []string
	for name, s := range ix.WeightMap {
		if s == shard {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return out
}

// openShards opens every shard of ix and checks the index against them: a shard file that is missing is an error
// naming it and the tensors it should hold, and so is a tensor the index places in a shard that lacks it.
func openShards(ix *ShardIndex) ([]*safetensorsFile, error) {
	dir := filepath.Dir(ix.Path)
	var files []*safetensorsFile
	fail := func(err error) ([]*safetensorsFile, error) {
		for _, f := range files {
			f.close()
		}
		return nil, err
	}
	for _, shard := range ix.Shards() {
		p := filepath.Join(dir, shard)
		if _, err := os.Stat(p); err != nil {
			names := ix.tensorsIn(shard)
			return fail(fmt.Errorf("loaders: %s: shard %s (holding %d tensors, e.g. %q) is missing: %w (an incomplete download? fetch the file again)", ix.Path, shard, len(names), names[0], err))
		}
		f, err := openSafetensorsFile(p)
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
		for _, name := range ix.tensorsIn(shard) {
			if _, ok := f.hdr.byName[name]; !ok {
				return fail(fmt.Errorf("loaders: %s: the weight_map places tensor %q in %s, which does not hold it", ix.Path, name, shard))
			}
		}
	}
	return files, nil
}
