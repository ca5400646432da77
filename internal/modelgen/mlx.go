package modelgen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// MLX conversions of a Hugging Face qwen3_next checkpoint, written as mlx_lm.convert writes them
// (mlx-lm's convert.py, utils.py quantize_model / save_model and models/qwen3_next.py sanitize;
// mlx's affine quantization in mlx/ops.cpp), so that tests need no download: FORMATS.md section 2.

// MLXOptions are the arguments of one conversion, as mlx_lm.convert's.
type MLXOptions struct {
	// Quantize (-q) quantizes in mode affine with Bits (--q-bits, 0: 4) and Group
	// (--q-group-size, 0: 64).
	Quantize    bool
	Bits, Group int
	// Recipe (--quant-predicate) is "" (the model's own predicate: the router mlp.gate and
	// mlp.shared_expert_gate at 8 bits in groups of 64, everything else at Bits), or one of
	// "mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6": v_proj and down_proj of the first and
	// last eighth of the layers and of every third layer between at the high width, lm_head at
	// the high width, every other module at the low one; each quantized module gets its own
	// entry in the quantization block, with the group size Group as given (0 writes null, as
	// mlx_lm.convert does without --q-group-size).
	Recipe string
}

// mlxRecipes are the (low, high) bit widths of mlx_lm's mixed recipes.
var mlxRecipes = map[string][2]int{"mixed_2_6": {2, 6}, "mixed_3_4": {3, 4}, "mixed_3_6": {3, 6}, "mixed_4_6": {4, 6}}

// mlxShiftedNorms are the norms mlx_lm's qwen3_next sanitize stores as 1 + w.
var mlxShiftedNorms = []string{".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight", ".k_norm.weight"}

// ConvertMLX writes the MLX conversion of the qwen3_next checkpoint in src (per-expert expert
// tensors, as published) into dst: mtp.* dropped (lm_head too when embeddings are tied), experts
// stacked into mlp.switch_mlp.{gate,up,down}_proj.weight, conv1d weights moved to [C, K, 1],
// the norms of mlxShiftedNorms stored as 1 + w (rounded to the tensor's dtype), and with
// o.Quantize every Linear and Embedding module whose input width the group size divides
// quantized (codes, scales and biases in the weights' dtype). config.json gains the
// quantization block twice (quantization and quantization_config), keys sorted, indent 4; the
// weights go to model.safetensors with metadata {"format": "mlx"} beside
// model.safetensors.index.json.
func ConvertMLX(src, dst string, o MLXOptions) error {
	cfg, err := readConfig(src)
	if err != nil {
		return err
	}
	if cfg["model_type"] != "qwen3_next" {
		return fmt.Errorf("modelgen: ConvertMLX: model_type %v (mlx_lm's qwen3_next conversion only)", cfg["model_type"])
	}
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	w := map[string]*mlxTensor{}
	for _, n := range ck.Names() {
		if strings.HasPrefix(n, "mtp.") {
			continue
		}
		t, _ := ck.Tensor(n)
		mt, err := readMLXTensor(t)
		if err != nil {
			return err
		}
		w[n] = mt
	}
	if tied, _ := cfg["tie_word_embeddings"].(bool); tied {
		delete(w, "lm_head.weight")
	}
	layers := int(num(cfg["num_hidden_layers"]))
	experts := int(num(cfg["num_experts"]))
	for l := 0; l < layers; l++ {
		pre := fmt.Sprintf("model.layers.%d.mlp.", l)
		for _, p := range []string{"up_proj", "down_proj", "gate_proj"} {
			if w[pre+"experts.0."+p+".weight"] == nil {
				continue // a dense MLP layer
			}
			var parts []*mlxTensor
			for e := 0; e < experts; e++ {
				n := fmt.Sprintf("%sexperts.%d.%s.weight", pre, e, p)
				if w[n] == nil {
					return fmt.Errorf("modelgen: ConvertMLX: %s is missing", n)
				}
				parts = append(parts, w[n])
				delete(w, n)
			}
			w[pre+"switch_mlp."+p+".weight"] = stackMLX(parts)
		}
	}
	for n, t := range w {
		if strings.Contains(n, "experts.gate_up_proj") {
			return fmt.Errorf("modelgen: ConvertMLX: %s: fused experts (mlx_lm's sanitize reads the published per-expert layout)", n)
		}
		if strings.Contains(n, "conv1d.weight") && len(t.shape) == 3 && t.shape[2] != 1 {
			t.shape = []int64{t.shape[0], t.shape[2], t.shape[1]} // moveaxis(2, 1) of [C, 1, K]
		}
		for _, sfx := range mlxShiftedNorms {
			if strings.HasSuffix(n, sfx) && len(t.shape) == 1 {
				for i, v := range t.vals {
					t.vals[i] = roundTo(v+1, t.dtype)
				}
			}
		}
	}
	out := map[string]*mlxTensor{}
	var quant map[string]any
	if o.Quantize {
		if quant, err = quantizeMLX(w, out, cfg, o); err != nil {
			return err
		}
		cfg["quantization"] = quant
		cfg["quantization_config"] = quant
	}
	for n, t := range w {
		if out[n] == nil {
			out[n] = t
		}
	}
	return writeMLX(dst, cfg, out)
}

// mlxTensor is a tensor on its way through a conversion: float values (exact widenings of the
// stored dtype) or packed codes.
type mlxTensor struct {
	dtype  safetensors.DType
	shape  []int64
	vals   []float32
	codes  []uint32 // U32 tensors
	params int64    // logical parameters (codes count their unpacked elements)
}

func readMLXTensor(t *safetensors.Tensor) (*mlxTensor, error) {
	switch t.DType {
	case safetensors.BF16, safetensors.F16, safetensors.F32:
	default:
		return nil, fmt.Errorf("modelgen: %s is %s (want BF16, F16 or F32)", t.Name, t.DType)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, err
	}
	return &mlxTensor{dtype: t.DType, shape: slices.Clone(t.Shape), vals: v, params: int64(len(v))}, nil
}

func stackMLX(parts []*mlxTensor) *mlxTensor {
	t := &mlxTensor{dtype: parts[0].dtype, shape: append([]int64{int64(len(parts))}, parts[0].shape...)}
	for _, p := range parts {
		t.vals = append(t.vals, p.vals...)
	}
	t.params = int64(len(t.vals))
	return t
}

// roundTo rounds v to dtype (BF16 or F16 round to nearest even; F32 unchanged).
func roundTo(v float32, dt safetensors.DType) float32 {
	switch dt {
	case safetensors.BF16:
		return math.Float32frombits(uint32(bf16(v)) << 16)
	case safetensors.F16:
		return float16.Fromfloat32(v).Float32()
	}
	return v
}

// mlxModules lists the quantizable modules of the converted model (MLX's Linear, Embedding and
// SwitchLinear layers) by path, with their weight names.
func mlxModules(w map[string]*mlxTensor) []string {
	var mods []string
	for n, t := range w {
		if !strings.HasSuffix(n, ".weight") || len(t.shape) < 2 || strings.Contains(n, "conv1d") {
			continue
		}
		mods = append(mods, strings.TrimSuffix(n, ".weight"))
	}
	sort.Strings(mods)
	return mods
}

// quantizeMLX quantizes the modules of w into out as mlx_lm's quantize_model does and returns
// the quantization block.
func quantizeMLX(w, out map[string]*mlxTensor, cfg map[string]any, o MLXOptions) (map[string]any, error) {
	bits, group := o.Bits, o.Group
	if bits == 0 {
		bits = 4
	}
	if group == 0 {
		group = 64
	}
	if !slices.Contains(op.QuantBits, bits) || !slices.Contains(op.QuantGroups, group) {
		return nil, fmt.Errorf("modelgen: %d bits in groups of %d: not an MLX affine quantization", bits, group)
	}
	block := map[string]any{"group_size": group, "bits": bits, "mode": "affine"}
	var recipe [2]int
	if o.Recipe != "" {
		r, ok := mlxRecipes[o.Recipe]
		if !ok {
			return nil, fmt.Errorf("modelgen: unknown recipe %q", o.Recipe)
		}
		recipe = r
	}
	layers := int(num(cfg["num_hidden_layers"]))
	for _, mod := range mlxModules(w) {
		t := w[mod+".weight"]
		in := int(t.shape[len(t.shape)-1])
		if in%group != 0 {
			continue // mlx_lm leaves a module the default group size does not divide as it is
		}
		b, g := bits, group
		switch {
		case o.Recipe != "":
			b = recipe[0]
			if mixedHigh(mod, layers) {
				b = recipe[1]
			}
			entry := map[string]any{"group_size": nil, "bits": b, "mode": "affine"}
			if o.Group != 0 {
				entry["group_size"] = o.Group
			}
			block[mod] = entry
		case strings.HasSuffix(mod, "mlp.gate") || strings.HasSuffix(mod, "shared_expert_gate"):
			b, g = 8, 64
			block[mod] = map[string]any{"group_size": 64, "bits": 8}
		}
		if in%g != 0 {
			return nil, fmt.Errorf("modelgen: %s: group size %d does not divide %d", mod, g, in)
		}
		codes, scales, biases := affineQuantize(t.vals, in, b, g, t.dtype)
		rowsShape := t.shape[:len(t.shape)-1]
		out[mod+".weight"] = &mlxTensor{dtype: safetensors.U32, shape: append(slices.Clone(rowsShape), int64(in*b/32)), codes: codes, params: t.params}
		gs := append(slices.Clone(rowsShape), int64(in/g))
		out[mod+".scales"] = &mlxTensor{dtype: t.dtype, shape: gs, vals: scales, params: int64(len(scales))}
		out[mod+".biases"] = &mlxTensor{dtype: t.dtype, shape: slices.Clone(gs), vals: biases, params: int64(len(biases))}
	}
	return block, nil
}

// mixedHigh is mlx_lm's mixed_quant_predicate choice of the high bit width: v_proj and down_proj
// of layers in the first and last eighth and every third layer between, and lm_head.
func mixedHigh(mod string, layers int) bool {
	if strings.Contains(mod, "lm_head") {
		return true
	}
	index := 0
	if parts := strings.Split(mod, "."); len(parts) > 2 {
		index, _ = strconv.Atoi(parts[2]) // model.layers.N...
	}
	more := index < layers/8 || index >= 7*layers/8 || (index-layers/8)%3 == 2
	return more && (strings.Contains(mod, "v_proj") || strings.Contains(mod, "down_proj"))
}

// affineQuantize is mlx's affine quantization (mlx/ops.cpp affine_quantize) of rows of in
// values in groups of g at b bits, in float32: per group the scale (max - min) / (2^b - 1) (at
// least 1e-7), negated unless |min| > |max|; the edge (min or max, by that test) rounded to a
// whole number q0 of scales, the scale adjusted to edge / q0 and the bias set to the edge (0 when
// q0 = 0); codes clip(round((w - bias) / scale), 0, 2^b - 1) packed least significant bit first;
// scales and biases rounded to dt.
func affineQuantize(vals []float32, in, b, g int, dt safetensors.DType) (codes []uint32, scales, biases []float32) {
	nbins := float32(int(1)<<b - 1)
	rows := len(vals) / in
	codes = make([]uint32, rows*in*b/32)
	for r := 0; r < rows; r++ {
		stream := codes[r*in*b/32 : (r+1)*in*b/32]
		for g0 := 0; g0 < in; g0 += g {
			grp := vals[r*in+g0 : r*in+g0+g]
			lo, hi := grp[0], grp[0]
			for _, v := range grp {
				lo, hi = min(lo, v), max(hi, v)
			}
			mask := float32(math.Abs(float64(lo))) > float32(math.Abs(float64(hi)))
			scale := max((hi-lo)/nbins, 1e-7)
			edge := hi
			if mask {
				edge = lo
			} else {
				scale = -scale
			}
			q0 := float32(math.RoundToEven(float64(edge / scale)))
			bias := float32(0)
			if q0 != 0 {
				scale = edge / q0
				bias = edge
			}
			for i, v := range grp {
				q := float32(math.RoundToEven(float64((v - bias) / scale)))
				q = min(max(q, 0), nbins)
				c := uint32(q)
				for k := 0; k < b; k++ {
					bit := (g0+i)*b + k
					stream[bit/32] |= (c >> k & 1) << (bit % 32)
				}
			}
			scales = append(scales, roundTo(scale, dt))
			biases = append(biases, roundTo(bias, dt))
		}
	}
	return codes, scales, biases
}

// writeMLX writes config.json (sorted keys, indent 4), model.safetensors (metadata format mlx)
// and model.safetensors.index.json (metadata total_size and total_parameters, weight_map sorted).
func writeMLX(dst string, cfg map[string]any, ts map[string]*mlxTensor) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var wts []safetensors.WriteTensor
	weightMap := map[string]string{}
	var size, params int64
	for n, t := range ts {
		wt := safetensors.WriteTensor{Name: n, DType: t.dtype, Shape: t.shape, Data: t.bytes()}
		wts = append(wts, wt)
		weightMap[n] = safetensors.SingleFile
		size += int64(len(wt.Data))
		params += t.params
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), wts, map[string]string{"format": "mlx"}); err != nil {
		return err
	}
	idx, err := json.MarshalIndent(map[string]any{
		"metadata":   map[string]any{"total_size": size, "total_parameters": params},
		"weight_map": weightMap,
	}, "", "    ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, safetensors.IndexFile), idx, 0o644); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(cfg, "", "    ") // encoding/json sorts map keys, as save_config does
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "config.json"), cj, 0o644)
}

// bytes encodes the tensor in its dtype, little-endian.
func (t *mlxTensor) bytes() []byte {
	switch t.dtype {
	case safetensors.U32:
		b := make([]byte, 4*len(t.codes))
		for i, c := range t.codes {
			binary.LittleEndian.PutUint32(b[4*i:], c)
		}
		return b
	case safetensors.F32:
		b := make([]byte, 4*len(t.vals))
		for i, v := range t.vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	b := make([]byte, 2*len(t.vals))
	for i, v := range t.vals {
		h := bf16(v)
		if t.dtype == safetensors.F16 {
			h = float16.Fromfloat32(v).Bits()
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

func readConfig(dir string) (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("modelgen: %s/config.json: %v", dir, err)
	}
	return cfg, nil
}

func num(v any) float64 { f, _ := v.(float64); return f }

// DequantizeMLX writes the Hugging Face qwen3_next checkpoint whose weights are exactly the
// values an MLX conversion in src holds, all in float32 (bf16 cannot hold dequantized values):
// every quantized module dequantized (scale * q + bias per group, evaluated in float64 from codes
// read bit by bit and rounded once to float32), switch_mlp experts unstacked into
// mlp.experts.{e}.{gate,up,down}_proj.weight, conv1d weights back to [C, 1, K], the norms of
// mlxShiftedNorms as stored - 1 (exact in float32), everything else widened exactly. config.json
// loses the quantization block and gets dtype float32. Transformers run on it computes from the
// weights strata reads from src, which is what the MLX goldens need.
func DequantizeMLX(src, dst string) error {
	cfg, err := readConfig(src)
	if err != nil {
		return err
	}
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	get := func(n string) *safetensors.Tensor { t, _ := ck.Tensor(n); return t }
	var out []safetensors.WriteTensor
	put := func(name string, shape []int64, v []float32) {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: b})
	}
	for _, n := range ck.Names() {
		if strings.HasSuffix(n, ".scales") || strings.HasSuffix(n, ".biases") {
			continue
		}
		t := get(n)
		shape := slices.Clone(t.Shape)
		var v []float32
		if mod := strings.TrimSuffix(n, ".weight"); t.DType == safetensors.U32 {
			bits, group := declaredQuant(cfg, mod)
			if v, err = dequantMLX(t, get(mod+".scales"), get(mod+".biases"), bits, group); err != nil {
				return err
			}
			shape[len(shape)-1] = t.Shape[len(t.Shape)-1] * 32 / int64(bits)
		} else if v, err = t.Float32(); err != nil {
			return err
		}
		if strings.Contains(n, "conv1d.weight") && len(shape) == 3 && shape[2] == 1 {
			shape = []int64{shape[0], 1, shape[1]}
		}
		for _, sfx := range mlxShiftedNorms {
			if strings.HasSuffix(n, sfx) && len(shape) == 1 {
				for i := range v {
					v[i]--
				}
			}
		}
		if i := strings.Index(n, ".mlp.switch_mlp."); i >= 0 {
			E, per := shape[0], int64(len(v))/shape[0]
			proj := strings.TrimSuffix(n[i+len(".mlp.switch_mlp."):], ".weight")
			for e := int64(0); e < E; e++ {
				put(fmt.Sprintf("%s.mlp.experts.%d.%s.weight", n[:i], e, proj), shape[1:], v[e*per:(e+1)*per])
			}
			continue
		}
		put(n, shape, v)
	}
	delete(cfg, "quantization")
	delete(cfg, "quantization_config")
	cfg["dtype"] = "float32"
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), out, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "config.json"), cj, 0o644)
}

// declaredQuant is the bit width and group size config.json's quantization block declares for
// module mod: its entry, else the block's (null or absent: 4 bits, groups of 64).
func declaredQuant(cfg map[string]any, mod string) (bits, group int) {
	block, _ := cfg["quantization"].(map[string]any)
	e, ok := block[mod].(map[string]any)
	if !ok {
		e = block
	}
	bits, group = 4, 64
	if v, ok := e["bits"].(float64); ok {
		bits = int(v)
	}
	if v, ok := e["group_size"].(float64); ok {
		group = int(v)
	}
	return bits, group
}

// dequantMLX dequantizes the U32 codes w [..., out, words] of bits-bit values with scales and
// biases s, b [..., out, in/group] (BF16 or F16).
func dequantMLX(w, s, b *safetensors.Tensor, bits, group int) ([]float32, error) {
	if s == nil || b == nil {
		return nil, fmt.Errorf("modelgen: %s: codes without scales and biases", w.Name)
	}
	sv, err := s.Float32()
	if err != nil {
		return nil, err
	}
	bv, err := b.Float32()
	if err != nil {
		return nil, err
	}
	words := int(w.Shape[len(w.Shape)-1])
	groups := int(s.Shape[len(s.Shape)-1])
	rows := int(w.NumElements()) / words
	if words*32%bits != 0 || words*32/bits != groups*group {
		return nil, fmt.Errorf("modelgen: %s: %d words and %d groups per row do not fit %d bits in groups of %d", w.Name, words, groups, bits, group)
	}
	in := groups * group
	raw := w.Data
	out := make([]float32, rows*in)
	for r := 0; r < rows; r++ {
		for i := 0; i < in; i++ {
			var q uint32
			for k := 0; k < bits; k++ {
				bit := i*bits + k
				word := binary.LittleEndian.Uint32(raw[4*(r*words+bit/32):])
				q |= (word >> (bit % 32) & 1) << k
			}
			gi := r*groups + i/group
			out[r*in+i] = float32(float64(sv[gi])*float64(q) + float64(bv[gi]))
		}
	}
	return out, nil
}

// MLXVariant is one MLX conversion of the tiny Qwen3-Next checkpoint whose transformers logits
// are committed as goldens (testdata/goldens/mlx_goldens.safetensors, keys "<Name>.a.logits",
// "<Name>.b.logits").
type MLXVariant struct {
	Name string
	MLXOptions
}

// MLXGoldenVariants are the conversions with goldens: every bit width, every group size at least
// once (groups of 32 quantize the experts' down_proj too, whose input width 32 the larger groups
// do not divide), the model's 8-bit router and shared-expert gate, and mlx_lm's mixed_3_6 recipe
// with its per-module entries (null group sizes, as mlx_lm.convert writes them by default).
var MLXGoldenVariants = []MLXVariant{
	{"q2_g32", MLXOptions{Quantize: true, Bits: 2, Group: 32}},
	{"q3_g64", MLXOptions{Quantize: true, Bits: 3, Group: 64}},
	{"q4_g64", MLXOptions{Quantize: true, Bits: 4, Group: 64}},
	{"q5_g128", MLXOptions{Quantize: true, Bits: 5, Group: 128}},
	{"q6_g64", MLXOptions{Quantize: true, Bits: 6, Group: 64}},
	{"q8_g32", MLXOptions{Quantize: true, Bits: 8, Group: 32}},
	{"mixed_3_6", MLXOptions{Quantize: true, Recipe: "mixed_3_6"}},
}
