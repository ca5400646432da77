package strata

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/stratakernels/strata/internal/safetensors"
)

// Fingerprint sampling: fingerprintWindow bytes at the start, middle and end of every shard's
// data section, and fingerprintTensorBytes from the middle of every tensor.
const (
	fingerprintWindow      = 4096
	fingerprintTensorBytes = 64
)

// fingerprint is a Model's fingerprint, computed once.
type fingerprint struct {
	once sync.Once
	v    string
	err  error
}

// Fingerprint identifies the checkpoint the model was loaded from, so that a session state file
// made by one checkpoint is refused by another: the SHA-256 (hex) of
//   - config.json, canonicalised (parsed and written back with sorted keys and no white space:
//     a re-indented file is the same config);
//   - the tensor table: every tensor's name, dtype and shape, in name order (the sharding is not
//     part of it);
//   - a sample of the weights: 4 KiB at the start, the middle and the end of each shard's data
//     section (in shard name order) and 64 bytes from the middle of every tensor, read with
//     pread (12 KiB per shard and 64 B per tensor: about 8 MB of the 360 GB of
//     Qwen3.8-Flash-Next), so that two checkpoints of the same shapes (a fine-tune, another
//     seed) are told apart without reading the weights.
//
// A model loaded from a GGUF file is fingerprinted from the file alone (ggufFingerprint): its
// metadata in place of config.json, its tensor table and a sample of its tensors.
//
// It covers config.json (or the GGUF metadata), the tensor table and those windows, and nothing
// else: it is not a hash of every weight byte. Checkpoints that differ throughout their weights (a
// fine-tune, another seed, another quantization) differ in the windows and are told apart; two
// that differ only in bytes no window covers (an edit of a few weights) get the same fingerprint,
// and a state file of one loads into the other. A hash of every byte was not chosen: SHA-256 ran
// at 0.3 to 0.5 GB/s on a 2-core AMD EPYC (Zen 5), about a minute for a 20 GB checkpoint
// and over ten for the 360 GB one, before reading the files, at every load of a checkpoint not
// seen before. A checkpoint re-sharded, or converted to another dtype or layout, gets another
// fingerprint. The value
// does not depend on the backend, the stage (LoadOptions.Layers) or WidenBudget. It is computed
// on the first call (from the files as they are then) and kept. Errors wrap ErrCheckpoint (a
// file that cannot be read).
func (m *Model) Fingerprint() (string, error) {
	m.fp.once.Do(func() {
		if m.gg != nil {
			m.fp.v, m.fp.err = ggufFingerprint(m.gg)
			return
		}
		m.fp.v, m.fp.err = checkpointFingerprint(m.dir, m.ck)
	})
	return m.fp.v, m.fp.err
}

// checkpointFingerprint computes Fingerprint for the checkpoint in dir opened as ck.
func checkpointFingerprint(dir string, ck *safetensors.Checkpoint) (string, error) {
	h := sha256.New()
	io.WriteString(h, "strata checkpoint fingerprint v1\n")
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return "", wrapf(ErrCheckpoint, err, "fingerprint: reading %s", cfgPath)
	}
	canon, err := canonicalJSON(raw)
	if err != nil {
		return "", wrapf(ErrCheckpoint, err, "fingerprint: %s", cfgPath)
	}
	writeField(h, canon)
	for _, n := range ck.Names() {
		t, err := ck.Tensor(n)
		if err != nil {
			return "", wrapf(ErrCheckpoint, err, "fingerprint")
		}
		writeField(h, fmt.Appendf(nil, "%s %s %v", n, t.DType, t.Shape))
	}
	for _, f := range ck.Files() {
		if err := sampleFile(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// sampleFile hashes the windows of one shard: three of its data section, then the middle of
// each of its tensors in name order.
func sampleFile(h hash.Hash, f *safetensors.File) error {
	fd, err := os.Open(f.Path)
	if err != nil {
		return wrapf(ErrCheckpoint, err, "fingerprint")
	}
	defer fd.Close()
	buf := make([]byte, fingerprintWindow)
	read := func(off, n int64) error {
		b := buf[:n]
		k, err := fd.ReadAt(b, f.DataStart()+off)
		if err != nil && err != io.EOF {
			return wrapf(ErrCheckpoint, err, "fingerprint: reading %s at byte %d", f.Path, f.DataStart()+off)
		}
		writeField(h, b[:k]) // a short read (a truncated file) hashes what is there
		return nil
	}
	size := f.DataSize()
	w := min(int64(fingerprintWindow), size)
	for _, off := range []int64{0, (size - w) / 2, size - w} {
		if err := read(off, w); err != nil {
			return err
		}
	}
	for _, n := range f.Names() {
		t, err := f.Tensor(n)
		if err != nil {
			return wrapf(ErrCheckpoint, err, "fingerprint")
		}
		begin, end := t.Offsets()
		k := min(int64(fingerprintTensorBytes), end-begin)
		if err := read(begin+(end-begin-k)/2, k); err != nil {
			return err
		}
	}
	return nil
}

// writeField hashes b with its length, so that fields cannot run into each other.
func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// canonicalJSON parses a JSON document and writes it back compactly with object keys sorted
// (numbers as written).
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
