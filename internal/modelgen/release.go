package modelgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
)

// Release is the structure of a published bf16 checkpoint: its config.json and its tensor table,
// split into as many shards as the release has (genreg.Release).
type Release = genreg.Release

// Releases are the published checkpoints strata runs, by name: every family's (family/NAME/gen).
var Releases = genreg.Releases

// HeaderOnly configures WriteHeaderOnly.
type HeaderOnly struct {
	// Truncate ends every shard after the tensors that carry data (the PLE buffers) instead
	// of extending it to its full size with a hole; only a header-only reader accepts such a
	// file.
	Truncate bool
	// Config and Tensors, when set, edit the config and the tensor table before writing (tests
	// use them to damage one thing).
	Config  func(map[string]any)
	Tensors func([]safetensors.WriteTensor) []safetensors.WriteTensor
}

// WriteHeaderOnly writes r into dir (created if needed): config.json,
// model.safetensors.index.json and r.Shards shards model-0000k-of-0000N.safetensors, each with
// its complete header. The weights are not written: a shard's data section is a hole (a sparse
// file of the full size, so a 360 GB release takes a few megabytes of disk) or, with Truncate,
// absent. The PLE hash buffers are written with their values. Tensors are assigned to shards
// in order, each shard holding about 1/Shards of the bytes (an edited table may need fewer).
func WriteHeaderOnly(dir string, r Release, opts HeaderOnly) error {
	cfg := r.Config()
	if opts.Config != nil {
		opts.Config(cfg)
	}
	ts := r.Tensors()
	if opts.Tensors != nil {
		ts = opts.Tensors(ts)
	}
	shards, err := splitShards(ts, r.Shards)
	if err != nil {
		return fmt.Errorf("modelgen: %s: %w", r.Name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	weightMap := map[string]string{}
	var total int64
	for k, part := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", k+1, len(shards))
		for _, t := range part {
			weightMap[t.Name] = name
			total += tensorBytes(t)
		}
		if err := safetensors.WriteSparseFile(filepath.Join(dir, name), part, map[string]string{"format": "pt"}, opts.Truncate); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFile), append(idx, '\n'), 0o644); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), append(cj, '\n'), 0o644)
}

func tensorBytes(t safetensors.WriteTensor) int64 {
	n := int64(t.DType.Size())
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// splitShards cuts ts, in order, into at most n non-empty runs: a new shard starts when the
// next tensor would take the current one past a size limit, the smallest limit that gives at
// most n shards (found by bisection). The published tables split into exactly their shard
// count; an edited table with a huge tensor may give fewer.
func splitShards(ts []safetensors.WriteTensor, n int) ([][]safetensors.WriteTensor, error) {
	if len(ts) == 0 || n < 1 {
		return nil, fmt.Errorf("%d tensors cannot fill %d shards", len(ts), n)
	}
	split := func(limit int64) [][]safetensors.WriteTensor {
		var out [][]safetensors.WriteTensor
		var cur []safetensors.WriteTensor
		var size int64
		for _, t := range ts {
			b := tensorBytes(t)
			if len(cur) > 0 && size+b > limit {
				out = append(out, cur)
				cur, size = nil, 0
			}
			cur = append(cur, t)
			size += b
		}
		return append(out, cur)
	}
	var lo, hi int64 = 1, 0
	for _, t := range ts {
		hi += tensorBytes(t)
	}
	for lo < hi {
		if mid := lo + (hi-lo)/2; len(split(mid)) <= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return split(lo), nil
}

// ReleaseNames lists the names of Releases, sorted.
func ReleaseNames() []string {
	var n []string
	for k := range Releases {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
