package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IndexFile is the name of the shard index of a sharded Hugging Face checkpoint.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded Hugging Face checkpoint.
const SingleFile = "model.safetensors"

// Checkpoint is a set of safetensors files seen as one name space: a sharded checkpoint with
// model.safetensors.index.json, or a single model.safetensors.
type Checkpoint struct {
	Dir    string
	files  []*File
	byName map[string]*Tensor
	names  []string
}

// OpenDir opens the checkpoint in dir. With an index, every shard it names is opened and
// validated as by Open; a shard name must be a plain file name inside dir (no separators, no
// "." or ".."); every index entry must point at a shard that holds that tensor; a tensor present
// in a shard but absent from the index, a name in two shards and a name listed twice in the
// index are errors. Without an index, dir/model.safetensors is opened. Errors name the index
// file, the shard and the tensor involved and wrap ErrFormat or, for an index entry whose shard
// lacks the tensor, ErrNotFound; a missing shard file also wraps fs.ErrNotExist.
func OpenDir(dir string) (*Checkpoint, error) { return openDir(dir, Open) }

// OpenDirHeaders opens the checkpoint in dir as OpenDir does, with every file opened by
// OpenHeader: the index and every header are validated, nothing is mapped, and a shard whose
// data section is truncated is accepted (see File.DataPresent). Reading it takes time in
// proportion to the headers, not to the weights.
func OpenDirHeaders(dir string) (*Checkpoint, error) { return openDir(dir, OpenHeader) }

func openDir(dir string, open func(string) (*File, error)) (*Checkpoint, error) {
	idxPath := filepath.Join(dir, IndexFile)
	raw, err := os.ReadFile(idxPath)
	if errors.Is(err, os.ErrNotExist) {
		f, err := open(filepath.Join(dir, SingleFile))
		if err != nil {
			return nil, err
		}
		c := &Checkpoint{Dir: dir, byName: map[string]*Tensor{}}
		c.files = []*File{f}
		for _, n := range f.names {
			c.byName[n] = f.tensors[n]
		}
		c.names = f.Names()
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, idxPath, err)
	}
	var idx struct {
		WeightMap json.RawMessage `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON: %v", ErrFormat, idxPath, err)
	}
	if len(idx.WeightMap) == 0 || string(idx.WeightMap) == "null" {
		return nil, fmt.Errorf("%w: %s: weight_map is missing", ErrFormat, idxPath)
	}
	dup, err := duplicateKey(idx.WeightMap)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: weight_map: %v", ErrFormat, idxPath, err)
	}
	if dup != "" {
		return nil, fmt.Errorf("%w: %s: tensor %q is listed twice in weight_map", ErrFormat, idxPath, dup)
	}
	var weightMap map[string]string
	if err := json.Unmarshal(idx.WeightMap, &weightMap); err != nil {
		return nil, fmt.Errorf("%w: %s: weight_map must map tensor names to shard file names: %v", ErrFormat, idxPath, err)
	}
	if len(weightMap) == 0 {
		return nil, fmt.Errorf("%w: %s: weight_map is empty", ErrFormat, idxPath)
	}
	// Names are visited in sorted order so that the first error reported is the same on every run.
	names := make([]string, 0, len(weightMap))
	for n := range weightMap {
		names = append(names, n)
	}
	sort.Strings(names)
	shards := map[string]*File{}
	c := &Checkpoint{Dir: dir, byName: map[string]*Tensor{}}
	fail := func(err error) (*Checkpoint, error) { c.Close(); return nil, err }
	var shardNames []string
	firstTensor := map[string]string{} // shard -> first tensor (sorted) mapped to it, for messages
	for _, n := range names {
		s := weightMap[n]
		if _, ok := shards[s]; ok {
			continue
		}
		firstTensor[s] = n
		if s == "" || s == "." || s == ".." || s != filepath.Base(s) || strings.ContainsAny(s, `/\`) {
			return fail(fmt.Errorf("%w: %s: tensor %q: shard name %q must be a plain file name inside %s", ErrFormat, idxPath, n, s, dir))
		}
		shards[s] = nil
		shardNames = append(shardNames, s)
	}
	sort.Strings(shardNames)
	for _, s := range shardNames {
		f, err := open(filepath.Join(dir, s))
		if err != nil {
			return fail(fmt.Errorf("shard %s (named by %s, e.g. for tensor %q): %w", s, idxPath, firstTensor[s], err))
		}
		shards[s] = f
		c.files = append(c.files, f)
	}
	for _, name := range names {
		s := weightMap[name]
		t, ok := shards[s].tensors[name]
		if !ok {
			return fail(fmt.Errorf("%w: %s: index maps tensor %q to %s, which does not hold it", ErrNotFound, idxPath, name, s))
		}
		c.byName[name] = t
	}
	for _, f := range c.files {
		for _, n := range f.names {
			if weightMap[n] != filepath.Base(f.Path) {
				if _, ok := weightMap[n]; ok {
					return fail(fmt.Errorf("%w: %s: tensor %q is in %s and in %s", ErrFormat, idxPath, n, f.Path, weightMap[n]))
				}
				return fail(fmt.Errorf("%w: %s: tensor %q of %s is not listed in the index", ErrFormat, idxPath, n, f.Path))
			}
		}
	}
	c.names = names
	return c, nil
}

// Files returns the files of the checkpoint (the shards in name order, or the one file).
func (c *Checkpoint) Files() []*File { return append([]*File(nil), c.files...) }

// Names returns every tensor name of the checkpoint, sorted.
func (c *Checkpoint) Names() []string { return append([]string(nil), c.names...) }

// Tensor returns the named tensor or an error wrapping ErrNotFound.
func (c *Checkpoint) Tensor(name string) (*Tensor, error) {
	t, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q in checkpoint %s", ErrNotFound, name, c.Dir)
	}
	return t, nil
}

// Close closes every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var first error
	for _, f := range c.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.files = nil
	return first
}
