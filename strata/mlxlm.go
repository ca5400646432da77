package strata

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// An mlx-lm prompt-cache file is what mlx-lm's save_prompt_cache writes and
// `mlx_lm.generate --prompt-cache-file` continues from (mlx_lm/models/cache.py; mlx's
// save_safetensors and tree_flatten name its entries): one safetensors file whose tensor
// `i.<path>` is entry <path> of layer i's cache state and whose metadata holds `0.i` = "" (the
// layer's meta state: neither class has one), `1.<key>` = the caller's metadata ("model", the id
// mlx_lm.generate loads, and "tokenizer_config", a JSON object) and `2.i` = the layer's cache
// class. Per layer, for a session of T tokens:
//
//	KVCache (attention)   i.0 keys [1, Hkv, T, HeadDim] (after k_norm and RoPE), i.1 values [1, Hkv, T, HeadDim]
//	ArraysCache (GDN)     conv state [1, ConvK-1, channels] (the [q | k | v] projection rows before the
//	                      conv, oldest first), recurrent state [1, Hv, Dv, Dk] float32, named
//	                      new format (mlx-lm after PR #1632, 2026-08-22): i.0.0 conv, i.0.1 recurrent,
//	                      i.1 and i.2 (left_padding, lengths) empty float32 [0]
//	                      legacy format (mlx-lm before it):               i.0 conv, i.1 recurrent
//
// Keys, values and conv state are stored in one activation dtype, the recurrent state in float32.
// The header is written as mlx writes it (compact JSON, keys sorted, no padding), the data in
// name order.
const (
	// MLXLMFormatNew is the prompt-cache format of mlx-lm after PR #1632 (2026-08-22), whose
	// ArraysCache state is (cache, left_padding, lengths); loading its empty arrays needs
	// mlx >= 0.32.1.
	MLXLMFormatNew = "new"
	// MLXLMFormatLegacy is the format of mlx-lm before PR #1632: an ArraysCache's state is its list.
	MLXLMFormatLegacy = "legacy"
)

// mlxlmDTypes maps MLXLMOptions.DType to the safetensors dtype of the activation tensors.
var mlxlmDTypes = map[string]safetensors.DType{"bfloat16": safetensors.BF16, "float16": safetensors.F16, "float32": safetensors.F32}

// MLXLMOptions configure Session.WriteMLXLMCache and SaveMLXLMCache.
type MLXLMOptions struct {
	// Format is MLXLMFormatNew ("new"; "" means it) or MLXLMFormatLegacy ("legacy").
	Format string
	// DType is the dtype of keys, values and conv states: "bfloat16", "float16" or "float32"
	// (the session's float32 states exactly). "" means the model's activation dtype as mlx-lm
	// runs it: the dtype of the stored embedding table (of its scales for an MLX affine-quantized
	// one); a table in another format (FP8, mxfp4) needs DType set.
	DType string
	// Model is the metadata "model": the model mlx_lm.generate loads (a Hugging Face id or a
	// directory; given --model, it must be the same string). "" means the absolute path of the
	// checkpoint directory the model was loaded from.
	Model string
}

// mlxlmTensor is one tensor of an mlx-lm cache file: its name, dtype and shape, and how its
// float32 elements are produced in file order (nil for an empty one).
type mlxlmTensor struct {
	name  string
	dt    safetensors.DType
	shape []int64
	elems func() []float32
}

func (t *mlxlmTensor) size() int64 {
	n := int64(t.dt.Size())
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// WriteMLXLMCache writes the session's state to w as an mlx-lm prompt-cache file (the layout
// above) of opts.Format, so that mlx-lm continues decoding after the session's tokens. The
// states are the session's own (the attention keys as the session cached them, after k_norm and
// RoPE; the conv rows it carries; its float32 recurrent state transposed per head from strata's
// [Dk, Dv] to mlx-lm's [Dv, Dk]), read back from the device as SaveState reads them; only the
// dtype conversion (round to nearest even) is applied. Everything is checked before the first
// byte is written, so on error w receives nothing. Errors wrap ErrUnsupported (a family mlx-lm
// has no model for, such as qwen4_exp; layer_types that disagree with the
// full_attention_interval mlx-lm places layers by; a pipeline stage, which does not hold every
// layer; an embedding table whose format gives no default dtype), ErrInvalidArgument (an unknown
// format or dtype, an empty session, a state the dtype cannot hold: non-finite or beyond its
// range), ErrBusy, ErrClosed or the writer's error.
func (s *Session) WriteMLXLMCache(w io.Writer, opts MLXLMOptions) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	ts, meta, err := s.mlxlmTensors(opts)
	if err != nil {
		return fmt.Errorf("mlx-lm prompt cache: %w", err)
	}
	return writeMLXLM(w, ts, meta)
}

// SaveMLXLMCache writes the session's mlx-lm prompt-cache file (WriteMLXLMCache) to path
// atomically, as SaveStateFile writes (a temporary file in the same directory, fsync, rename):
// path holds its old content or the whole file, never a part, and on error nothing is left.
// path must end in ".safetensors" (mlx chooses the reader by the name). Errors as
// WriteMLXLMCache's, naming the file.
func (s *Session) SaveMLXLMCache(path string, opts MLXLMOptions) error {
	if !strings.HasSuffix(path, ".safetensors") {
		return wrapf(ErrInvalidArgument, nil, "mlx-lm prompt-cache file %q: the name must end in .safetensors (mlx reads a prompt cache by that extension)", path)
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	ts, meta, err := s.mlxlmTensors(opts)
	if err != nil {
		return fmt.Errorf("mlx-lm prompt-cache file %s: %w", path, err)
	}
	return WriteFile(path, func(w io.Writer) error { return writeMLXLM(w, ts, meta) })
}

// MLXLMModel returns the mlx-lm model module that runs this model (qwen3_next, qwen3_5 or
// qwen3_5_moe: mlx_lm/models/NAME.py), or why its sessions cannot be written as an mlx-lm
// prompt cache: errors wrap ErrUnsupported and name a family mlx-lm has no model for (qwen4_exp),
// the first layer whose layer_types entry disagrees with the full_attention_interval mlx-lm
// places the attention layers by, or a pipeline stage (LoadOptions.Layers), whose sessions do not
// hold every layer. A host checks it before a long prefill it means to export.
func (m *Model) MLXLMModel() (string, error) {
	mod, err := family.MLXLMLayout(m.cfg)
	if err != nil {
		return "", err
	}
	if m.lo != 0 || m.hi != m.cfg.Layers {
		return "", wrapf(ErrUnsupported, nil, "a pipeline stage (layers %d:%d of %d) does not hold every layer's state; mlx-lm's cache holds all of them", m.lo, m.hi, m.cfg.Layers)
	}
	return mod, nil
}

// mlxlmTensors checks the export and lists the file's tensors (in name order) and metadata.
func (s *Session) mlxlmTensors(opts MLXLMOptions) ([]mlxlmTensor, map[string]string, error) {
	m := s.m
	format := opts.Format
	if format == "" {
		format = MLXLMFormatNew
	}
	if format != MLXLMFormatNew && format != MLXLMFormatLegacy {
		return nil, nil, wrapf(ErrInvalidArgument, nil, "mlx-lm cache format %q: %q (mlx-lm after PR #1632) or %q", opts.Format, MLXLMFormatNew, MLXLMFormatLegacy)
	}
	if _, err := m.MLXLMModel(); err != nil {
		return nil, nil, err
	}
	if m.gg != nil {
		return nil, nil, wrapf(ErrUnsupported, nil, "the model was loaded from the GGUF file %s, whose GDN value heads may be in llama.cpp's tiled order: an mlx-lm cache is exported from a model loaded from its Hugging Face or MLX directory", m.dir)
	}
	if s.pos == 0 {
		return nil, nil, wrapf(ErrInvalidArgument, nil, "the session is empty (position 0); mlx-lm saves no cache of no tokens")
	}
	dt, err := mlxlmDType(m, opts.DType)
	if err != nil {
		return nil, nil, err
	}
	model := opts.Model
	if model == "" {
		if model, err = filepath.Abs(m.dir); err != nil {
			return nil, nil, wrapf(ErrInvalidArgument, err, "the checkpoint directory %s", m.dir)
		}
	}
	meta := map[string]string{"1.model": model, "1.tokenizer_config": "{}"}
	var ts []mlxlmTensor
	T := s.pos
	for _, ly := range m.layers {
		i := ly.Index
		meta[fmt.Sprintf("0.%d", i)] = ""
		for _, st := range ly.States() {
			switch {
			case ly.GDN != nil && (st.Role == family.RoleConv || st.Role == family.RoleRecurrent):
			case ly.Attn != nil && (st.Role == family.RoleK || st.Role == family.RoleV):
			default:
				return nil, nil, wrapf(ErrUnsupported, nil, "layer %d holds a %s state, which mlx-lm's cache has no place for", i, st.Role)
			}
		}
		switch {
		case ly.GDN != nil:
			g := ly.GDN
			meta[fmt.Sprintf("2.%d", i)] = "ArraysCache"
			conv := s.state.at[stateKey{i, family.RoleConv}].t.F32()[:(g.ConvK-1)*g.Channels()]
			rec := s.state.at[stateKey{i, family.RoleRecurrent}].t.F32()[:g.Hv*g.Dk*g.Dv]
			convT := mlxlmTensor{dt: dt, shape: []int64{1, int64(g.ConvK - 1), int64(g.Channels())}, elems: func() []float32 { return conv }}
			recT := mlxlmTensor{dt: safetensors.F32, shape: []int64{1, int64(g.Hv), int64(g.Dv), int64(g.Dk)},
				elems: func() []float32 { return swapInner(rec, g.Hv, g.Dk, g.Dv) }}
			if format == MLXLMFormatNew {
				convT.name, recT.name = fmt.Sprintf("%d.0.0", i), fmt.Sprintf("%d.0.1", i)
				ts = append(ts, convT, recT,
					mlxlmTensor{name: fmt.Sprintf("%d.1", i), dt: safetensors.F32, shape: []int64{0}},
					mlxlmTensor{name: fmt.Sprintf("%d.2", i), dt: safetensors.F32, shape: []int64{0}})
			} else {
				convT.name, recT.name = fmt.Sprintf("%d.0", i), fmt.Sprintf("%d.1", i)
				ts = append(ts, convT, recT)
			}
		default:
			a := ly.Attn
			meta[fmt.Sprintf("2.%d", i)] = "KVCache"
			for j, role := range []string{family.RoleK, family.RoleV} {
				rows := s.state.at[stateKey{i, role}].t.F32()[:T*a.Hkv*a.HeadDim]
				ts = append(ts, mlxlmTensor{name: fmt.Sprintf("%d.%d", i, j), dt: dt, shape: []int64{1, int64(a.Hkv), int64(T), int64(a.HeadDim)},
					elems: func() []float32 { return swapOuter(rows, T, a.Hkv, a.HeadDim) }})
			}
		}
	}
	sort.Slice(ts, func(a, b int) bool { return ts[a].name < ts[b].name })
	for i := range ts {
		if err := checkMLXLMValues(&ts[i]); err != nil {
			return nil, nil, err
		}
	}
	return ts, meta, nil
}

// mlxlmDType resolves MLXLMOptions.DType for m (see there).
func mlxlmDType(m *Model, name string) (safetensors.DType, error) {
	if name != "" {
		dt, ok := mlxlmDTypes[name]
		if !ok {
			return "", wrapf(ErrInvalidArgument, nil, "mlx-lm cache dtype %q: bfloat16, float16 or float32", name)
		}
		return dt, nil
	}
	e := m.embed
	d := e.DType
	if d == op.QAffine {
		d = e.Q.ScaleDType
	}
	switch d {
	case op.BF16:
		return safetensors.BF16, nil
	case op.F16:
		return safetensors.F16, nil
	case op.F32:
		return safetensors.F32, nil
	}
	return "", wrapf(ErrUnsupported, nil, "the embedding table is stored as %v, which gives no activation dtype mlx-lm is known to run it in; set the dtype (bfloat16, float16 or float32)", e.DType)
}

// swapOuter returns x [a, b, c] as [b, a, c] (the attention rows [T, Hkv, HeadDim] as mlx-lm's
// [Hkv, T, HeadDim]).
func swapOuter(x []float32, a, b, c int) []float32 {
	out := make([]float32, len(x))
	for i := range a {
		for j := range b {
			copy(out[(j*a+i)*c:(j*a+i+1)*c], x[(i*b+j)*c:(i*b+j+1)*c])
		}
	}
	return out
}

// swapInner returns x [a, b, c] as [a, c, b] (the recurrent state [Hv, Dk, Dv] as mlx-lm's
// [Hv, Dv, Dk]).
func swapInner(x []float32, a, b, c int) []float32 {
	out := make([]float32, len(x))
	for h := range a {
		src, dst := x[h*b*c:(h+1)*b*c], out[h*b*c:(h+1)*b*c]
		for i := range b {
			for j := range c {
				dst[j*b+i] = src[i*c+j]
			}
		}
	}
	return out
}

// mlxlmLimit is the largest finite magnitude of each dtype after rounding to nearest even:
// values at or past the midpoint to the next power of two would round to infinity.
var mlxlmLimit = map[safetensors.DType]float64{
	safetensors.F32:  math.MaxFloat32,
	safetensors.BF16: 0x1.ff8p127, // (2 - 2^-8) * 2^127: the bfloat16 rounding boundary below infinity
	safetensors.F16:  65520,       // 65504 + half an ulp
}

// checkMLXLMValues refuses a tensor holding a value that is not finite or that would round to
// infinity in its dtype (mlx-lm could not continue from it).
func checkMLXLMValues(t *mlxlmTensor) error {
	if t.elems == nil {
		return nil
	}
	lim := mlxlmLimit[t.dt]
	for k, v := range t.elems() {
		f := math.Abs(float64(v))
		if math.IsNaN(f) || math.IsInf(f, 0) || f > lim || (f == lim && t.dt != safetensors.F32) {
			return wrapf(ErrInvalidArgument, nil, "tensor %s element %d is %v, which %s cannot hold", t.name, k, v, t.dt)
		}
	}
	return nil
}

// writeMLXLM writes the file: the 8-byte little-endian header length, the header as mlx writes
// it (compact JSON, keys sorted at every level, no padding), then the tensors' data in order.
func writeMLXLM(w io.Writer, ts []mlxlmTensor, meta map[string]string) error {
	header := map[string]any{"__metadata__": meta}
	var off int64
	for _, t := range ts {
		header[t.name] = map[string]any{"data_offsets": []int64{off, off + t.size()}, "dtype": string(t.dt), "shape": t.shape}
		off += t.size()
	}
	var hj bytes.Buffer
	enc := json.NewEncoder(&hj)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(header); err != nil {
		return wrapf(ErrInvalidArgument, err, "mlx-lm prompt cache header")
	}
	head := bytes.TrimSuffix(hj.Bytes(), []byte("\n"))
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(head)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	for _, t := range ts {
		if t.elems == nil {
			continue
		}
		if _, err := w.Write(encodeMLXLM(t.elems(), t.dt)); err != nil {
			return err
		}
	}
	return nil
}

// encodeMLXLM returns the little-endian bytes of x in dt (F32 exactly; BF16 and F16 rounded to
// nearest even, subnormals kept, as mlx converts).
func encodeMLXLM(x []float32, dt safetensors.DType) []byte {
	size := dt.Size()
	out := make([]byte, size*len(x))
	for i, v := range x {
		switch dt {
		case safetensors.F32:
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		case safetensors.BF16:
			binary.LittleEndian.PutUint16(out[2*i:], bf16Bits(v))
		default:
			binary.LittleEndian.PutUint16(out[2*i:], f16Bits(v))
		}
	}
	return out
}

// bf16Bits rounds a finite float32 to bfloat16 bits, to nearest even.
func bf16Bits(v float32) uint16 {
	b := math.Float32bits(v)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// f16Bits rounds a finite float32 within float16's range to IEEE half-precision bits, to nearest
// even (subnormal results included).
func f16Bits(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127
	mant := b & 0x7fffff
	switch {
	case exp < -25: // below half the smallest subnormal (2^-24): rounds to zero
		return sign
	case exp < -14: // a subnormal half: value = m * 2^-24, m = round(1.mant * 2^(exp+24))
		m := mant | 0x800000
		shift := uint(-exp - 1) // 2^(exp+24) * 2^-23 * m: shift right by 23 - (exp + 24) = -exp - 1
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && q&1 == 1) {
			q++
		}
		return sign | uint16(q)
	}
	q := uint32(exp+15)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && q&1 == 1) {
		q++ // a carry into the exponent is the correct rounding
	}
	return sign | uint16(q)
}
