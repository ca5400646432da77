package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
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
// validated, and every index entry must point at a shard that holds that tensor; tensors
// present in a shard but absent from the index are an error, as is a name in two shards.
// Without an index, dir/model.safetensors is opened. Errors wrap ErrFormat or ErrNotFound.
func OpenDir(dir string) (*Checkpoint, error) {
	idxPath := filepath.Join(dir, IndexFile)
	raw, err := os.ReadFile(idxPath)
	if errors.Is(err, os.ErrNotExist) {
		f, err := Open(filepath.Join(dir, SingleFile))
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
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, idxPath, err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%w: %s: malformed JSON: %v", ErrFormat, idxPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%w: %s: weight_map is missing or empty", ErrFormat, idxPath)
	}
	shards := map[string]*File{}
	c := &Checkpoint{Dir: dir, byName: map[string]*Tensor{}}
	fail := func(err error) (*Checkpoint, error) { c.Close(); return nil, err }
	var shardNames []string
	for _, s := range idx.WeightMap {
		if _, ok := shards[s]; !ok {
			shards[s] = nil
			shardNames = append(shardNames, s)
		}
	}
	sort.Strings(shardNames)
	for _, s := range shardNames {
		if s != filepath.Base(s) || s == "" || s == "." || s == ".." {
			return fail(fmt.Errorf("%w: %s: shard name %q must be a plain file name", ErrFormat, idxPath, s))
		}
		f, err := Open(filepath.Join(dir, s))
		if err != nil {
			return fail(fmt.Errorf("index %s names shard %s: %w", idxPath, s, err))
		}
		shards[s] = f
		c.files = append(c.files, f)
	}
	for name, s := range idx.WeightMap {
		t, ok := shards[s].tensors[name]
		if !ok {
			return fail(fmt.Errorf("%w: %s: index maps tensor %q to %s, which does not hold it", ErrNotFound, idxPath, name, s))
		}
		c.byName[name] = t
	}
	for _, f := range c.files {
		for _, n := range f.names {
			if idx.WeightMap[n] != filepath.Base(f.Path) {
				if _, ok := idx.WeightMap[n]; ok {
					return fail(fmt.Errorf("%w: %s: tensor %q is in %s and in %s", ErrFormat, idxPath, n, f.Path, idx.WeightMap[n]))
				}
				return fail(fmt.Errorf("%w: %s: tensor %q of %s is not listed in the index", ErrFormat, idxPath, n, f.Path))
			}
		}
	}
	for n := range c.byName {
		c.names = append(c.names, n)
	}
	sort.Strings(c.names)
	return c, nil
}

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
