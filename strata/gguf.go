package strata

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/gguf"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/op"
)

// isGGUF reports whether a model path names a GGUF file (by its extension, as llama.cpp's
// tools name them): LoadModel and Inspect read it as one instead of a checkpoint directory.
func isGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }

// openGGUF opens a GGUF file (or split set; headerOnly: its headers alone), reads its config and
// checks its tensor table against the plan (family.GGUFConfig, family.CheckGGUF). Nothing stays
// open after an error.
func openGGUF(path string, headerOnly bool) (*gguf.File, *hfconfig.Config, *family.CheckResult, error) {
	open := gguf.Open
	if headerOnly {
		open = gguf.OpenHeader
	}
	f, err := open(path)
	if err != nil {
		return nil, nil, nil, wrapf(ErrCheckpoint, err, "GGUF file")
	}
	cfg, err := family.GGUFConfig(f)
	if err != nil {
		f.Close()
		return nil, nil, nil, wrapf(ErrCheckpoint, err, "GGUF config")
	}
	res, err := family.CheckGGUF(cfg, f)
	if err != nil {
		f.Close()
		return nil, nil, nil, wrapf(ErrCheckpoint, err, "GGUF %s", path)
	}
	return f, cfg, res, nil
}

// ggufMatrices reads the e [n, k] slices of a stacked GGUF tensor [e, n, k] (e 0: a matrix
// [n, k]; a 1-D tensor [k] read as [1, k]), views of the mapping (gguf.Tensor.Matrices).
func (l *loader) ggufMatrices(name string, e, n, k int) ([]*op.Matrix, error) {
	t := l.gg.Tensor(name)
	if t == nil {
		return nil, wrapf(ErrCheckpoint, nil, "GGUF %s: no tensor %s", l.gg.Path, name)
	}
	l.done += t.Bytes
	if l.progress != nil {
		l.progress(l.done, l.total, name)
	}
	if len(t.Dims) == 1 && n == 1 && e == 0 { // ffn_gate_inp_shexp after llama-quantize
		c := *t
		c.Dims = []uint64{t.Dims[0], 1}
		t = &c
	}
	ms, err := t.Matrices()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "GGUF tensor %s", name)
	}
	if want := max(e, 1); len(ms) != want || ms[0].N != n || ms[0].K != k {
		return nil, wrapf(ErrCheckpoint, nil, "GGUF tensor %s %v holds %d matrices [%d, %d], the plan reads %d [%d, %d]", name, t.Shape(), len(ms), ms[0].N, ms[0].K, want, n, k)
	}
	return ms, nil
}

// ggufVec reads a GGUF vector widened to float32, undoing the converter's transform the plan
// names: a zero-centred gain stored as 1 + w read as stored - 1, ssm_a (-exp(A_log)) read as
// log(-stored) in float64 (exp of the result gives back the stored value to within an ulp).
func (l *loader) ggufVec(v family.Vec) ([]float32, error) {
	t := l.gg.Tensor(v.Tensor)
	if t == nil {
		return nil, wrapf(ErrCheckpoint, nil, "GGUF %s: no tensor %s", l.gg.Path, v.Tensor)
	}
	x, err := t.Float32()
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "GGUF tensor %s", v.Tensor)
	}
	if len(x) != v.Len {
		return nil, wrapf(ErrCheckpoint, nil, "GGUF tensor %s holds %d values, the plan reads %d", v.Tensor, len(x), v.Len)
	}
	l.done += t.Bytes
	if l.progress != nil {
		l.progress(l.done, l.total, v.Tensor)
	}
	switch {
	case v.Shifted:
		for i := range x {
			x[i]-- // exact but for |stored - 1| below an ulp of 1 (the file holds float32(1 + w))
		}
	case v.NegExp:
		for i, a := range x {
			if !(a < 0) || math.IsInf(float64(a), 0) {
				return nil, wrapf(ErrCheckpoint, nil, "GGUF tensor %s[%d] = %v: ssm_a holds -exp(A_log), a negative finite value", v.Tensor, i, a)
			}
			x[i] = float32(math.Log(-float64(a)))
		}
	}
	return x, nil
}

// ggufFingerprint is Fingerprint for a GGUF model: the SHA-256 of every metadata entry (key,
// type and value), the tensor table (name, type, extents, in name order) and a sample of the
// weights (4 KiB at the start and at the end of the first and of the last tensor of each part,
// 64 bytes from the middle of every tensor), as a directory's fingerprint covers its config,
// table and samples. A file re-split, re-quantized or converted again gets another one.
func ggufFingerprint(f *gguf.File) (string, error) {
	h := sha256.New()
	io.WriteString(h, "strata GGUF fingerprint v1\n")
	for _, kv := range f.Metadata() {
		writeField(h, fmt.Appendf(nil, "%s %v %v %v", kv.Key, kv.Type, kv.Elem, kv.X))
	}
	ts := f.Tensors()
	byName := map[string]*gguf.Tensor{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	for _, n := range f.Names() {
		t := byName[n]
		writeField(h, fmt.Appendf(nil, "%s %v %v", n, t.Type, t.Dims))
	}
	for _, part := range f.Parts {
		var first, last *gguf.Tensor
		for _, t := range ts {
			if t.File != part {
				continue
			}
			if first == nil || t.Offset < first.Offset {
				first = t
			}
			if last == nil || t.Offset > last.Offset {
				last = t
			}
		}
		for _, t := range []*gguf.Tensor{first, last} {
			if t != nil {
				writeField(h, t.Data[:min(len(t.Data), fingerprintWindow)])
				writeField(h, t.Data[len(t.Data)-min(len(t.Data), fingerprintWindow):])
			}
		}
	}
	for _, n := range f.Names() {
		d := byName[n].Data
		k := min(len(d), fingerprintTensorBytes)
		writeField(h, d[(len(d)-k)/2:(len(d)-k)/2+k])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// GGUFInfo describes a GGUF file as InspectGGUF reads it (headers only).
type GGUFInfo struct {
	Path         string
	Parts        int    // files of the split set (1 for a single file)
	Architecture string // general.architecture
	Name         string // general.name, "" when absent
	Metadata     int    // metadata entries
	Tensors      int
	TensorBytes  int64
	// DataSize is the bytes of tensor data the tensor table describes, DataPresent how many the
	// file holds: less in a header-only copy or a file cut short, which loading refuses.
	DataSize, DataPresent int64
	// Types are the tensors by class (embedding, output, attention, GDN, router, experts,
	// shared expert, MLP, norms and vectors, MTP layers, other) and ggml type.
	Types []GGUFTypeBytes
	// Tokenizer summarises the tokenizer.ggml.* keys ("" when the file holds none).
	Tokenizer string
	// Model is what loading would find (as Inspect reports a directory), nil when the file
	// would be refused; Refused then says why (every refused tensor named with its type).
	Model   *ModelInfo
	Refused string
}

// GGUFTypeBytes is one class of tensors of one ggml type: count and bytes.
type GGUFTypeBytes struct {
	Class, Type string
	Tensors     int
	Bytes       int64
}

// InspectGGUF reads a GGUF file's (or split set's) headers without its data (header-only
// copies of published files included) and describes it: the tensors by class and type, the
// tokenizer's keys, and either what loading would find (the checks of LoadModel: the config from
// the metadata, every tensor of the plan with its shape and a type strata runs) or why it would be
// refused. Errors wrap ErrCheckpoint for a file the reader refuses (bad magic, version, bounds;
// the message names the file and the problem).
func InspectGGUF(path string) (*GGUFInfo, error) {
	f, err := gguf.OpenHeader(path)
	if err != nil {
		return nil, wrapf(ErrCheckpoint, err, "GGUF file")
	}
	defer f.Close()
	in := &GGUFInfo{Path: path, Parts: len(f.Parts), Metadata: len(f.Metadata()), DataSize: f.DataSize, DataPresent: f.DataPresent}
	in.Architecture, _ = f.String("general.architecture")
	in.Name, _ = f.String("general.name")
	layers := -1
	if n, err := f.Int(in.Architecture + ".block_count"); err == nil {
		mtp, _ := f.Int(in.Architecture + ".nextn_predict_layers")
		layers = int(n - mtp)
	}
	byKey := map[[2]string]*GGUFTypeBytes{}
	for _, t := range f.Tensors() {
		in.Tensors++
		in.TensorBytes += t.Bytes
		k := [2]string{ggufClass(t.Name, layers), t.Type.String()}
		g := byKey[k]
		if g == nil {
			g = &GGUFTypeBytes{Class: k[0], Type: k[1]}
			byKey[k] = g
		}
		g.Tensors++
		g.Bytes += t.Bytes
	}
	for _, g := range byKey {
		in.Types = append(in.Types, *g)
	}
	sortTypes(in.Types)
	if model, err := f.String("tokenizer.ggml.model"); err == nil {
		pre, _ := f.String("tokenizer.ggml.pre")
		toks, _ := f.Strings("tokenizer.ggml.tokens")
		merges, _ := f.Strings("tokenizer.ggml.merges")
		in.Tokenizer = fmt.Sprintf("%s (pre-tokenizer %q), %d tokens, %d merges", model, pre, len(toks), len(merges))
		for _, k := range []string{"bos", "eos", "padding"} {
			if id, err := f.Int("tokenizer.ggml." + k + "_token_id"); err == nil {
				in.Tokenizer += fmt.Sprintf(", %s %d", k, id)
			}
		}
	}
	cfg, err := family.GGUFConfig(f)
	if err == nil {
		var res *family.CheckResult
		if res, err = family.CheckGGUF(cfg, f); err == nil {
			mi := newModelInfo(path, cfg, nil, res)
			mi.Shards = len(f.Parts)
			in.Model = &mi
		}
	}
	if err != nil {
		in.Refused = err.Error()
	}
	return in, nil
}

// ggufClass names the class of a tensor by its llama.cpp name (layers: the decoder layers, -1
// unknown; blk.N past them is an MTP layer).
func ggufClass(name string, layers int) string {
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		i := strings.IndexByte(rest, '.')
		if n, err := strconv.Atoi(rest[:max(i, 0)]); err == nil && layers >= 0 && n >= layers {
			return "MTP layers"
		}
		name = rest[i+1:]
	}
	switch {
	case strings.HasPrefix(name, "token_embd"):
		return "embedding"
	case strings.HasPrefix(name, "output."):
		return "output"
	case strings.Contains(name, "norm") || name == "ssm_a" || strings.HasPrefix(name, "ssm_dt") || strings.HasPrefix(name, "ssm_conv1d"):
		return "norms and vectors"
	case strings.HasSuffix(name, "_exps.weight"):
		return "experts"
	case strings.Contains(name, "_shexp"):
		return "shared expert"
	case strings.HasPrefix(name, "ffn_gate_inp"):
		return "router"
	case strings.HasPrefix(name, "ffn_"):
		return "MLP"
	case strings.HasPrefix(name, "attn_qkv") || strings.HasPrefix(name, "attn_gate") || strings.HasPrefix(name, "ssm_"):
		return "GDN"
	case strings.HasPrefix(name, "attn_"):
		return "attention"
	}
	return "other"
}

var ggufClassOrder = []string{"embedding", "output", "attention", "GDN", "router", "experts", "shared expert", "MLP", "norms and vectors", "MTP layers", "other"}

func sortTypes(ts []GGUFTypeBytes) {
	sort.Slice(ts, func(i, j int) bool {
		a, b := slices.Index(ggufClassOrder, ts[i].Class), slices.Index(ggufClassOrder, ts[j].Class)
		if a != b {
			return a < b
		}
		if ts[i].Bytes != ts[j].Bytes {
			return ts[i].Bytes > ts[j].Bytes
		}
		return ts[i].Type < ts[j].Type
	})
}
