package modelgen

import (
	"context"
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

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
	"github.com/x448/float16"
)

// MLX conversions of a Hugging Face checkpoint of any family, written as mlx_lm.convert and
// mlx_vlm.convert write them (mlx-lm's convert.py, utils.py quantize_model / save_model and the
// models' sanitize; mlx's affine quantization in mlx/ops.cpp), so that tests need no download. The
// tensors are mapped from the family's plan under the checkpoint's layout onto its plan under the
// MLX layout (family.Plan.Walk lists the same weights at the same positions in both): the names,
// the expert stacking, the conv1d shape and which gains are stored as 1 + w are the family's.

// MLXOptions are the arguments of one conversion, as mlx_lm.convert's and mlx_vlm.convert's
// (genreg.MLXOptions, where the families' format fixtures name them).
type MLXOptions = genreg.MLXOptions

// mlxRecipes are the (low, high) bit widths of mlx_lm's mixed recipes.
var mlxRecipes = map[string][2]int{"mixed_2_6": {2, 6}, "mixed_3_4": {3, 4}, "mixed_3_6": {3, 6}, "mixed_4_6": {4, 6}}

// mlxLayout is the layout an MLX conversion of family f writes from a checkpoint of layout src:
// the family's MLX-only prefix (mlx-vlm's language_model.model.) where it has one, else its first;
// experts stacked under switch_mlp; conv1d [C, K, 1]; the gains the family stores shifted as
// 1 + w unless gainsAsW; tables split as in src.
func mlxLayout(f family.Family, src family.Layout, gainsAsW bool) family.Layout {
	ps := f.Prefixes()
	l := family.Layout{Prefix: ps[0], Experts: family.Stacked, MLX: true, ShiftedGains: !gainsAsW, NGramParts: src.NGramParts}
	for _, p := range ps {
		if p.MLXOnly {
			l.Prefix = p
			break
		}
	}
	return l
}

// openPlan loads the config of the checkpoint in dir and checks the checkpoint against it,
// returning its plan and the open checkpoint (the caller closes it).
func openPlan(dir string) (*family.CheckResult, *safetensors.Checkpoint, error) {
	cfg, err := family.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, nil, err
	}
	res, err := family.CheckCheckpoint(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	return res, ck, nil
}

// ConvertMLX writes the MLX conversion of the Hugging Face checkpoint in src into dst: mtp.* and
// the vision tower dropped (lm_head too when embeddings are tied), the family's MLX names (e.g.
// mlx-vlm's language_model.model. prefix), experts stacked into mlp.switch_mlp.{gate,up,down}_proj
// (from per-expert or fused tensors), conv1d weights moved to [C, K, 1], the gains the family
// stores shifted as 1 + w (rounded to the tensor's dtype; o.GainsAsW: as w), the constant tensors
// (the PLE hash buffers) kept as I64, and with o.Quantize every Linear and Embedding module whose
// input width the group size divides quantized (affine: codes, scales and biases in the weights'
// dtype; float modes: codes and U8 scales). config.json gains the quantization block twice
// (quantization and quantization_config), keys sorted, indent 4; the weights go to
// model.safetensors with metadata {"format": "mlx"} beside model.safetensors.index.json. The
// conversion is read back (family.CheckCheckpoint) and must be read with the gains' convention it
// was written in.
func ConvertMLX(src, dst string, o MLXOptions) error {
	return ConvertMLXContext(context.Background(), src, dst, o)
}

// ConvertMLXContext is ConvertMLX that stops when ctx is done, between two source matrices
// while reading, two modules while quantizing, or before the write (which runs to its end),
// with ctx's error: what it leaves in dst is then no checkpoint (no config.json, which is
// written last).
func ConvertMLXContext(ctx context.Context, src, dst string, o MLXOptions) error {
	raw, err := readConfig(src)
	if err != nil {
		return err
	}
	res, ck, err := openPlan(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	if res.Plan.Layout.MLX {
		return fmt.Errorf("modelgen: ConvertMLX: %s is an MLX conversion already", src)
	}
	cfg := res.Plan.Config
	f := family.Of(cfg)
	dl := mlxLayout(f, res.Plan.Layout, o.GainsAsW)
	dp, err := f.Plan(cfg, dl)
	if err != nil {
		return err
	}
	w, err := mapPlan(ctx, ck, res, dp, false)
	if err != nil {
		return err
	}
	out := map[string]*mlxTensor{}
	if o.Quantize {
		quant, err := quantizeMLX(ctx, w, out, dp, o)
		if err != nil {
			return err
		}
		raw["quantization"] = quant
		raw["quantization_config"] = quant
	}
	for n, t := range w {
		if out[n] == nil {
			out[n] = t
		}
	}
	if err := copyConstants(ck, res.Plan, dp, out); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := writeTensors(dst, raw, out, "mlx"); err != nil {
		return err
	}
	return readBack(dst, dl)
}

// readBack checks the checkpoint written into dst against its family (family.CheckCheckpoint) and
// that it is read under layout want's gains convention.
func readBack(dst string, want family.Layout) error {
	res, ck, err := openPlan(dst)
	if err != nil {
		return fmt.Errorf("modelgen: the checkpoint written does not load: %w", err)
	}
	defer ck.Close()
	if got := res.Plan.Layout; got.ShiftedGains != want.ShiftedGains {
		return fmt.Errorf("modelgen: the checkpoint written stores its zero-centred gains shifted %v, but %s reads them shifted %v (%s)",
			want.ShiftedGains, res.Plan.Config.Family, got.ShiftedGains, got.GainsWhy)
	}
	return nil
}

// copyConstants copies the constant tensors (the PLE hash buffers, I64) of the checkpoint of plan
// sp into out under plan dp's names, where the checkpoint stores them.
func copyConstants(ck *safetensors.Checkpoint, sp, dp *family.Plan, out map[string]*mlxTensor) error {
	for i, g := range sp.Constants {
		for j, k := range g.Tensors {
			t, err := ck.Tensor(k.Name)
			if err != nil {
				continue // absent: the group is all or none (family.CheckCheckpoint)
			}
			v, err := t.Int64s()
			if err != nil {
				return err
			}
			out[dp.Constants[i].Tensors[j].Name] = &mlxTensor{dtype: safetensors.I64, shape: slices.Clone(t.Shape), ints: v, params: int64(len(v))}
		}
	}
	return nil
}

// mapPlan builds the tensors of plan dp from the checkpoint of sp (res.Plan) as float32 values:
// every matrix's rows and every vector of sp, in Walk order, into the matrix or vector at the same
// position of dp. A gain dp stores shifted and sp does not gets + 1, rounded to the tensor's dtype
// (the other way: - 1, exact in float32). Quantized source modules are dequantized (dequantize;
// they take the dtype of their scales, BF16 for U8 ones); with f32 every tensor is float32, else
// each keeps its source dtype. It stops with ctx's error between two matrices once ctx is done.
func mapPlan(ctx context.Context, ck *safetensors.Checkpoint, res *family.CheckResult, dp *family.Plan, f32 bool) (map[string]*mlxTensor, error) {
	sp := res.Plan
	shapes := map[string][]int64{}
	for _, t := range dp.Tensors {
		shapes[t.Name] = t.Shape
	}
	srcShapes := map[string][]int64{}
	for _, t := range sp.Tensors {
		srcShapes[t.Name] = t.Shape
	}
	srcVals := map[string][]float32{}
	src := func(name string) ([]float32, safetensors.DType, error) {
		t, err := ck.Tensor(name)
		if err != nil {
			return nil, "", err
		}
		q, quant := res.Quant[name]
		dt := t.DType
		if quant {
			dt = dequantDType(q)
		}
		v, ok := srcVals[name]
		if !ok {
			if quant {
				v, err = dequantize(ck, q, srcShapes[name])
			} else {
				v, err = t.Float32()
			}
			if err != nil {
				return nil, "", err
			}
			srcVals[name] = v
		}
		return v, dt, nil
	}
	out := map[string]*mlxTensor{}
	dstT := func(name string, dt safetensors.DType) (*mlxTensor, error) {
		if t := out[name]; t != nil {
			return t, nil
		}
		shape, ok := shapes[name]
		if !ok {
			return nil, fmt.Errorf("modelgen: %s is not a tensor of the target plan", name)
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		if f32 {
			dt = safetensors.F32
		}
		t := &mlxTensor{dtype: dt, shape: slices.Clone(shape), vals: make([]float32, n), params: n}
		out[name] = t
		return t, nil
	}
	// rows lists the (tensor, first element) of every row of m, in order.
	type row struct {
		name string
		off  int
	}
	rows := func(m family.Mat, shape func(string) []int64) []row {
		var rs []row
		for _, p := range m.Parts {
			s := shape(p.Tensor)
			n := int(s[len(s)-2])
			for r := 0; r < p.Rows; r++ {
				rs = append(rs, row{p.Tensor, ((max(p.Index, 0))*n + p.Row + r) * m.K})
			}
		}
		return rs
	}
	sm, sv := sp.Walk()
	dm, dv := dp.Walk()
	if len(sm) != len(dm) || len(sv) != len(dv) {
		return nil, fmt.Errorf("modelgen: the plans of %s and %s do not match (%d/%d matrices, %d/%d vectors)", sp.Layout.Describe(), dp.Layout.Describe(), len(sm), len(dm), len(sv), len(dv))
	}
	for i := range sm {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a, b := rows(sm[i], func(n string) []int64 { return srcShapes[n] }), rows(dm[i], func(n string) []int64 { return shapes[n] })
		if len(a) != len(b) || sm[i].K != dm[i].K {
			return nil, fmt.Errorf("modelgen: matrix %d: %d rows of %d into %d rows of %d", i, len(a), sm[i].K, len(b), dm[i].K)
		}
		for r := range a {
			v, dt, err := src(a[r].name)
			if err != nil {
				return nil, err
			}
			t, err := dstT(b[r].name, dt)
			if err != nil {
				return nil, err
			}
			copy(t.vals[b[r].off:b[r].off+dm[i].K], v[a[r].off:a[r].off+sm[i].K])
		}
	}
	for i := range sv {
		v, dt, err := src(sv[i].Tensor)
		if err != nil {
			return nil, err
		}
		t, err := dstT(dv[i].Tensor, dt)
		if err != nil {
			return nil, err
		}
		copy(t.vals, v)
		switch {
		case dv[i].Shifted && !sv[i].Shifted:
			for k, x := range t.vals {
				t.vals[k] = roundTo(x+1, t.dtype)
			}
		case sv[i].Shifted && !dv[i].Shifted:
			for k := range t.vals {
				t.vals[k]--
			}
		}
	}
	for n := range shapes {
		if out[n] == nil {
			return nil, fmt.Errorf("modelgen: no weight of %s maps to %s", sp.Layout.Describe(), n)
		}
	}
	return out, nil
}

// mlxTensor is a tensor on its way through a conversion: float values (exact widenings of the
// stored dtype), packed codes, bytes or integers.
type mlxTensor struct {
	dtype  safetensors.DType
	shape  []int64
	vals   []float32
	codes  []uint32 // U32 tensors
	raw    []uint8  // U8 and F8_E4M3 tensors
	ints   []int64  // I64 tensors
	params int64    // logical parameters (codes count their unpacked elements)
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

// quantizeMLX quantizes the Linear and Embedding modules of plan dp in w into out as mlx_lm's
// quantize_model does (mlx-vlm's with o.VLM) and returns the quantization block.
func quantizeMLX(ctx context.Context, w, out map[string]*mlxTensor, dp *family.Plan, o MLXOptions) (map[string]any, error) {
	mode := o.Mode
	if mode == "" {
		mode = hfconfig.ModeAffine
	}
	var fm op.QuantMode
	for _, m := range op.QuantModes {
		if m.String() == mode {
			fm = m
		}
	}
	bits, group := o.Bits, o.Group
	switch {
	case fm != 0:
		if bits != 0 && bits != fm.Bits() || group != 0 && group != fm.Group() || o.Recipe != "" {
			return nil, fmt.Errorf("modelgen: mode %s takes %d bits in groups of %d and no recipe", mode, fm.Bits(), fm.Group())
		}
		bits, group = fm.Bits(), fm.Group()
	case mode != hfconfig.ModeAffine:
		return nil, fmt.Errorf("modelgen: unknown MLX quantization mode %q", mode)
	default:
		if bits == 0 {
			bits = 4
		}
		if group == 0 {
			group = 64
		}
		if !slices.Contains(op.QuantBits, bits) || !slices.Contains(op.QuantGroups, group) {
			return nil, fmt.Errorf("modelgen: %d bits in groups of %d: not an MLX affine quantization", bits, group)
		}
	}
	block := map[string]any{"group_size": group, "bits": bits, "mode": mode}
	var recipe [2]int
	if o.Recipe != "" {
		r, ok := mlxRecipes[o.Recipe]
		if !ok {
			return nil, fmt.Errorf("modelgen: unknown recipe %q", o.Recipe)
		}
		recipe = r
	}
	layers := dp.Config.Layers
	roles := map[string]string{}
	mats, _ := dp.Walk()
	for _, m := range mats {
		for _, p := range m.Parts {
			roles[p.Tensor] = m.Role
		}
	}
	var mods []string
	for _, t := range dp.Tensors {
		if t.Linear {
			mods = append(mods, t.Module())
		}
	}
	sort.Strings(mods)
	for _, mod := range mods {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := mod + ".weight"
		if _, ok := w[name]; !ok {
			name = mod // stacked experts of a fused layout carry no .weight suffix
		}
		t := w[name]
		in := int(t.shape[len(t.shape)-1])
		b, g, m := bits, group, fm
		switch role := roles[name]; {
		case o.VLM && role == "ngram_table":
			// mlx-vlm's fallback_group_size 32: the global group where it divides the row
			// width, else 32; recorded either way.
			if in%g != 0 {
				if m != 0 || in%32 != 0 {
					continue
				}
				g = 32
			}
			block[mod] = map[string]any{"group_size": g, "bits": b, "mode": mode}
		case in%g != 0:
			continue // mlx_lm and mlx-vlm leave a module the global group size does not divide as it is
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
		case role == "router" || role == "shared_expert_gate":
			b, g, m = 8, 64, 0
			entry := map[string]any{"group_size": 64, "bits": 8}
			if o.VLM {
				entry["mode"] = hfconfig.ModeAffine
			}
			block[mod] = entry
		}
		if in%g != 0 {
			return nil, fmt.Errorf("modelgen: %s: group size %d does not divide %d", mod, g, in)
		}
		rowsShape := t.shape[:len(t.shape)-1]
		gs := append(slices.Clone(rowsShape), int64(in/g))
		if m != 0 {
			codes, scales := mlxFloatQuantize(t.vals, in, m, t.dtype)
			out[mod+".weight"] = &mlxTensor{dtype: safetensors.U32, shape: append(slices.Clone(rowsShape), int64(in*b/32)), codes: codes, params: t.params}
			out[mod+".scales"] = &mlxTensor{dtype: safetensors.U8, shape: gs, raw: scales, params: int64(len(scales))}
			continue
		}
		codes, scales, biases := affineQuantize(t.vals, in, b, g, t.dtype)
		out[mod+".weight"] = &mlxTensor{dtype: safetensors.U32, shape: append(slices.Clone(rowsShape), int64(in*b/32)), codes: codes, params: t.params}
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
	if _, after, ok := strings.Cut(mod, "layers."); ok {
		n, _, _ := strings.Cut(after, ".")
		index, _ = strconv.Atoi(n)
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

// writeTensors writes config.json (sorted keys, indent 4), model.safetensors (metadata format
// "mlx" or "pt") and model.safetensors.index.json (metadata total_size and total_parameters,
// weight_map sorted).
func writeTensors(dst string, cfg map[string]any, ts map[string]*mlxTensor, format string) error {
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
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), wts, map[string]string{"format": format}); err != nil {
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
	case safetensors.U8, safetensors.F8E4M3:
		return slices.Clone(t.raw)
	case safetensors.I64:
		b := make([]byte, 8*len(t.ints))
		for i, v := range t.ints {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
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

// MLXVariant is one MLX conversion of testdata's tiny per-expert reference checkpoint (the
// one with model_goldens.safetensors, testdata/README.md) whose transformers logits are committed
// as goldens (testdata/goldens/mlx_goldens.safetensors, keys "<Name>.a.logits", "<Name>.b.logits").
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
