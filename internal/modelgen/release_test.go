package modelgen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteHeaderOnly: each release's table has unique names, splits into its published shard
// count, and the index maps every tensor to its shard with the total size of the table.
func TestWriteHeaderOnly(t *testing.T) {
	for _, name := range ReleaseNames() {
		t.Run(name, func(t *testing.T) {
			r := Releases[name]
			seen := map[string]bool{}
			var total int64
			for _, w := range r.Tensors() {
				if seen[w.Name] {
					t.Fatalf("%s listed twice", w.Name)
				}
				seen[w.Name] = true
				total += tensorBytes(w)
			}
			dir := t.TempDir()
			if err := WriteHeaderOnly(dir, r, HeaderOnly{Truncate: true}); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
			if err != nil {
				t.Fatal(err)
			}
			var idx struct {
				Metadata struct {
					TotalSize int64 `json:"total_size"`
				} `json:"metadata"`
				WeightMap map[string]string `json:"weight_map"`
			}
			if err := json.Unmarshal(raw, &idx); err != nil {
				t.Fatal(err)
			}
			shards := map[string]bool{}
			for _, s := range idx.WeightMap {
				shards[s] = true
			}
			if len(idx.WeightMap) != len(seen) || len(shards) != r.Shards || idx.Metadata.TotalSize != total {
				t.Fatalf("index: %d tensors in %d shards, %d bytes; table %d tensors, %d shards, %d bytes",
					len(idx.WeightMap), len(shards), idx.Metadata.TotalSize, len(seen), r.Shards, total)
			}
		})
	}
}
