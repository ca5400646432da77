package family

import (
	"fmt"
	"slices"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// QuantFormat is how a quantized module stores its weight: one of the formats the loader keeps
// packed in memory (op.QAffine, op.QFloat, op.FP8Block), decided per tensor from its dtype and
// the tensors beside it, and checked against config.json.
type QuantFormat int

// Quantized weight formats.
const (
	// MLXAffine: <module>.weight U32 codes of Bits bits, <module>.scales and .biases BF16 or F16
	// per group of Group inputs (mlx mode affine).
	MLXAffine QuantFormat = iota
	// MLXFloat: <module>.weight U32 codes, <module>.scales U8 per group, no biases (mlx modes
	// mxfp4, nvfp4, mxfp8: Mode).
	MLXFloat
	// FP8Blocks: <module>.weight F8_E4M3 [N, K] with <module>.weight_scale_inv BF16 or F32
	// [ceil(N/128), ceil(K/128)], one scale per block of 128 rows by 128 inputs (quant_method fp8).
	FP8Blocks
	// FP8Tensor: <module>.weight F8_E4M3 with one BF16 or F32 scale for the whole tensor, the
	// tensor the plan names (Spec.TensorScale; Qwen3.8-Flash-Next-FP8's n-gram table).
	FP8Tensor
)

// QuantTensor is one quantized module: the names of its codes and scales (and biases, affine),
// its format, and the bit width and group size its shapes give (checked against config.json).
type QuantTensor struct {
	Format                 QuantFormat
	Weight, Scales, Biases string // Biases only for MLXAffine
	Bits, Group            int    // MLX formats: bits per code, inputs per scale
	Mode                   op.QuantMode
	// ScaleDType is the dtype of the scales (and biases): BF16 or F16 (affine), U8 (float modes),
	// BF16 or F32 (FP8).
	ScaleDType safetensors.DType
}

// Tensors are the names of the module's tensors: codes, scales, and the biases of an affine one.
func (q QuantTensor) Tensors() []string {
	if q.Biases != "" {
		return []string{q.Weight, q.Scales, q.Biases}
	}
	return []string{q.Weight, q.Scales}
}

// Describe names the format: "4-bit affine in groups of 64", "mxfp4 (4 bits in groups of 32)",
// "FP8 E4M3 in 128 x 128 blocks, BF16 scales", "FP8 E4M3, one BF16 scale per tensor".
func (q QuantTensor) Describe() string {
	switch q.Format {
	case MLXAffine:
		return fmt.Sprintf("%d-bit affine in groups of %d", q.Bits, q.Group)
	case MLXFloat:
		return fmt.Sprintf("%v (%d bits in groups of %d)", q.Mode, q.Bits, q.Group)
	case FP8Blocks:
		return fmt.Sprintf("FP8 E4M3 in %d x %d blocks, %s scales", op.FP8BlockSize, op.FP8BlockSize, q.ScaleDType)
	}
	return fmt.Sprintf("FP8 E4M3, one %s scale per tensor", q.ScaleDType)
}

// resolveQuant finds the quantized modules of the tensor table and checks each against the
// config, per tensor:
//   - an F8_E4M3 weight is FP8 (config.json must have an fp8 quantization_config): a Linear or
//     Embedding weight [N, K] that modules_to_not_convert does not name (an Embedding table also
//     named by modules_to_convert), with exactly one scale: <module>.weight_scale_inv of shape
//     [ceil(N/128), ceil(K/128)] or the whole tensor's scale the plan names (Spec.TensorScale),
//     BF16 or F32;
//   - a Linear weight with <module>.scales is an MLX module: U32 codes [..., out, in*bits/32],
//     scales [..., out, in/group] that are BF16 or F16 with biases of the same dtype and shape
//     (affine) or U8 without biases (a float mode, its bits and group size fixed), the bits,
//     group size and mode those shapes give equal to what config.json declares for the module
//     (its own entry, else the defaults);
//   - a float Linear weight of an FP8 release must be named by modules_to_not_convert (quant_method
//     fp8 converts every Linear layer it does not name; lm_head is implied), and must not be named
//     by modules_to_convert; one of an MLX conversion whose config entry quantizes it is missing
//     its scales.
//
// It also refuses scales on a norm, conv or vector and MLX entries for modules the model does not
// have. It returns the quantized modules by weight name and the table with each described by its
// logical shape (codes unpacked, scales and biases removed), for checkTensors. Errors wrap
// hfconfig.ErrTensors, name the tensors and, where config.json and the tensors disagree, both
// readings.
func resolveQuant(c *hfconfig.Config, plan *Plan, tensors map[string]*safetensors.Tensor, shapes map[string][]int64) (map[string]QuantTensor, map[string][]int64, error) {
	quant := map[string]QuantTensor{}
	logical := make(map[string][]int64, len(shapes))
	for n, s := range shapes {
		logical[n] = s
	}
	var bad []string
	modules := map[string]bool{}
	for _, sp := range plan.Tensors {
		mod := sp.Module()
		if sp.Linear {
			modules[mod] = true
		}
		w := tensors[sp.Name]
		if w != nil && (w.DType == safetensors.F8E4M3 || w.DType == safetensors.F8E5M2) {
			q, problem := fp8Module(c, sp, w, tensors)
			if problem != "" {
				bad = append(bad, problem)
				continue
			}
			quant[sp.Name] = q
			delete(logical, q.Scales)
			continue
		}
		sc, bi := tensors[mod+".scales"], tensors[mod+".biases"]
		if sc == nil {
			if w != nil {
				bad = append(bad, unquantized(c, plan, sp, w, tensors)...)
			}
			continue
		}
		if !sp.Linear {
			bad = append(bad, fmt.Sprintf("%s.scales: %s is quantized, but only Linear and Embedding weights can be (norms, convolutions and gate vectors stay float)", mod, sp.Name))
			continue
		}
		if w == nil {
			continue // reported missing by checkTensors (the scales and biases as unexpected)
		}
		q, problem := mlxModule(c, sp, w, sc, bi)
		if problem != "" {
			bad = append(bad, problem)
			continue
		}
		quant[sp.Name] = q
		logical[sp.Name] = sp.Shape
		delete(logical, q.Scales)
		delete(logical, q.Biases)
	}
	if c.Quant != nil {
		for k := range c.Quant.Modules {
			if !modules[k] {
				bad = append(bad, fmt.Sprintf("config.json's quantization entry %q names no Linear or Embedding module of the model (no %s.weight is expected)", k, k))
			}
		}
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("%w: %d quantized-module problems: %s", hfconfig.ErrTensors, len(bad), cutList(bad, 8))
	}
	return quant, logical, nil
}

// unquantized checks a weight stored in float against the config's quantization.
func unquantized(c *hfconfig.Config, plan *Plan, sp Spec, w *safetensors.Tensor, tensors map[string]*safetensors.Tensor) []string {
	mod := sp.Module()
	var bad []string
	if tensors[mod+".weight_scale_inv"] != nil {
		bad = append(bad, fmt.Sprintf("%s.weight_scale_inv is an FP8 scale grid, but %s is %s, not F8_E4M3 codes", mod, sp.Name, w.DType))
	}
	if !sp.Linear {
		return bad
	}
	if c.Quant != nil {
		if d, own := c.Quant.For(mod); own && d.Quantized {
			bad = append(bad, fmt.Sprintf("config.json quantizes %s (%s), but %s.scales is missing", mod, d.Describe(), mod))
		}
	}
	if c.FP8 == nil {
		return bad
	}
	if e, ok := c.FP8.Included(mod); ok {
		return append(bad, fmt.Sprintf("config.json's modules_to_convert names %s (entry %q): its weight is FP8 there, but %s is %s", mod, e, sp.Name, w.DType))
	}
	if _, ok := c.FP8.Excluded(mod); !ok && !sp.Embedding && len(sp.Shape) == 2 && sp.Name != plan.Layout.LMHead {
		bad = append(bad, fmt.Sprintf("%s is %s, but config.json's modules_to_not_convert does not name %s: quant_method fp8 converts every Linear layer it does not name, so the release stores it as F8_E4M3 with %s.weight_scale_inv",
			sp.Name, w.DType, mod, mod))
	}
	return bad
}

// fp8Module checks one FP8 weight w of spec sp (its scale among tensors) against the config.
func fp8Module(c *hfconfig.Config, sp Spec, w *safetensors.Tensor, tensors map[string]*safetensors.Tensor) (QuantTensor, string) {
	mod := sp.Module()
	q := QuantTensor{Weight: w.Name}
	switch {
	case w.DType != safetensors.F8E4M3:
		return q, fmt.Sprintf("%s is %s: strata reads FP8 weights as E4M3 codes (F8_E4M3)", w.Name, w.DType)
	case !sp.Linear:
		return q, fmt.Sprintf("%s is F8_E4M3, but only Linear and Embedding weights are stored FP8 (norms, convolutions and gate vectors stay float)", w.Name)
	case c.FP8 == nil:
		return q, fmt.Sprintf("%s is F8_E4M3 (FP8), but config.json has no quantization_config with quant_method fp8", w.Name)
	case len(sp.Shape) != 2:
		return q, fmt.Sprintf("%s is F8_E4M3 stacked %v: FP8 weights are read as one matrix per tensor (experts one by one, mlp.experts.{e}.*)", w.Name, sp.Shape)
	case !slices.Equal(w.Shape, sp.Shape):
		return q, fmt.Sprintf("%s has shape %v, want %v", w.Name, w.Shape, sp.Shape)
	}
	if e, ok := c.FP8.Excluded(mod); ok {
		return q, fmt.Sprintf("config.json's modules_to_not_convert names %s (entry %q), which reads its weight unconverted, but %s is F8_E4M3 (FP8 codes)", mod, e, w.Name)
	}
	if _, ok := c.FP8.Included(mod); sp.Embedding && !ok {
		return q, fmt.Sprintf("%s is an embedding table stored F8_E4M3, but config.json's modules_to_convert does not name %s (quant_method fp8 converts Linear layers and the modules modules_to_convert names)", w.Name, mod)
	}
	N, K := int(sp.Shape[0]), int(sp.Shape[1])
	grid := tensors[mod+".weight_scale_inv"]
	var whole *safetensors.Tensor
	if sp.TensorScale != "" {
		whole = tensors[sp.TensorScale]
	}
	floatScale := func(t *safetensors.Tensor) string {
		if t.DType != safetensors.BF16 && t.DType != safetensors.F32 {
			return fmt.Sprintf("%s is %s, want BF16 or F32 scales for %s", t.Name, t.DType, w.Name)
		}
		return ""
	}
	switch {
	case grid != nil && whole != nil:
		return q, fmt.Sprintf("%s has two scales: the block grid %s and the whole tensor's %s", w.Name, grid.Name, whole.Name)
	case grid != nil:
		q.Format, q.Scales, q.ScaleDType = FP8Blocks, grid.Name, grid.DType
		if p := floatScale(grid); p != "" {
			return q, p
		}
		want := op.FP8Grid(N, K)
		if !slices.Equal(grid.Shape, []int64{int64(want[0]), int64(want[1])}) {
			return q, fmt.Sprintf("%s has shape %v, but the weight %s [%d, %d] in blocks of %d x %d needs [%d, %d] (ceil(%d/%d), ceil(%d/%d))",
				grid.Name, grid.Shape, w.Name, N, K, op.FP8BlockSize, op.FP8BlockSize, want[0], want[1], N, op.FP8BlockSize, K, op.FP8BlockSize)
		}
	case whole != nil:
		q.Format, q.Scales, q.ScaleDType = FP8Tensor, whole.Name, whole.DType
		if p := floatScale(whole); p != "" {
			return q, p
		}
		if whole.NumElements() != 1 || len(whole.Shape) > 1 {
			return q, fmt.Sprintf("%s has shape %v, want one scale ([] or [1]) for %s", whole.Name, whole.Shape, w.Name)
		}
	default:
		also := ""
		if sp.TensorScale != "" {
			also = " (nor its whole-tensor scale " + sp.TensorScale + ")"
		}
		return q, fmt.Sprintf("%s is F8_E4M3 without its scale: %s.weight_scale_inv is missing%s", w.Name, mod, also)
	}
	return q, ""
}

// mlxModule checks one MLX quantized module (weight w with scales sc and biases bi) against its
// logical shape sp.Shape [..., out, in] and the config, returning it or a problem naming the
// tensors.
func mlxModule(c *hfconfig.Config, sp Spec, w, sc, bi *safetensors.Tensor) (QuantTensor, string) {
	mod := sp.Module()
	q := QuantTensor{Weight: w.Name, Scales: sc.Name}
	if c.Quant == nil {
		return q, fmt.Sprintf("%s and %s.scales: quantized tensors, but config.json has no MLX quantization block", w.Name, mod)
	}
	d, own := c.Quant.For(mod)
	which := "the default of the quantization block"
	if own {
		which = "its own entry in the quantization block"
	}
	if !d.Quantized {
		return q, fmt.Sprintf("%s.scales exists, but config.json's quantization entry for %s is false (not quantized)", mod, mod)
	}
	n := len(sp.Shape)
	in := sp.Shape[n-1]
	lead := sp.Shape[:n-1]
	if w.DType != safetensors.U32 {
		return q, fmt.Sprintf("%s is %s, want U32 codes (its module has %s.scales)", w.Name, w.DType, mod)
	}
	if len(w.Shape) != n || !slices.Equal(w.Shape[:n-1], lead) {
		return q, fmt.Sprintf("%s has shape %v, want %v + [in*bits/32] for the logical weight %v", w.Name, w.Shape, lead, sp.Shape)
	}
	if len(sc.Shape) != n || !slices.Equal(sc.Shape[:n-1], lead) || sc.Shape[n-1] <= 0 {
		return q, fmt.Sprintf("%s has shape %v, want %v + [in/group] for the logical weight %v", sc.Name, sc.Shape, lead, sp.Shape)
	}
	q.ScaleDType = sc.DType
	switch sc.DType {
	case safetensors.BF16, safetensors.F16:
		q.Format, q.Biases = MLXAffine, mod+".biases"
		if bi == nil {
			return q, fmt.Sprintf("%s is missing (mode affine stores a bias per group beside %s)", q.Biases, sc.Name)
		}
		if bi.DType != sc.DType || !slices.Equal(bi.Shape, sc.Shape) {
			return q, fmt.Sprintf("%s is %s %v, want the dtype and shape of %s (%s %v)", bi.Name, bi.DType, bi.Shape, sc.Name, sc.DType, sc.Shape)
		}
	case safetensors.U8:
		q.Format = MLXFloat
		if bi != nil {
			return q, fmt.Sprintf("%s exists, but %s holds U8 scales of a float mode (mxfp4, nvfp4, mxfp8), which stores no biases", bi.Name, sc.Name)
		}
	default:
		return q, fmt.Sprintf("%s is %s, want BF16 or F16 scales (mode affine) or U8 (mxfp4, nvfp4, mxfp8)", sc.Name, sc.DType)
	}
	groups := sc.Shape[n-1]
	if in%groups != 0 {
		return q, fmt.Sprintf("%s holds %d groups per row, which do not divide in=%d of %s (the group size must divide the input width)", sc.Name, groups, in, w.Name)
	}
	q.Group = int(in / groups)
	words := w.Shape[n-1]
	if words*32%in != 0 {
		return q, fmt.Sprintf("%s has %d code words per row for in=%d: %d/%d bits per weight, not a whole bit width", w.Name, words, in, words*32, in)
	}
	q.Bits = int(words * 32 / in)
	got := hfconfig.ModuleQuant{Quantized: true, Mode: hfconfig.ModeAffine, Bits: q.Bits, Group: q.Group}
	if q.Format == MLXAffine {
		if !slices.Contains(op.QuantGroups, q.Group) {
			return q, fmt.Sprintf("%s gives group size %d (in=%d / %d groups), want one of %v", sc.Name, q.Group, in, groups, op.QuantGroups)
		}
		if !slices.Contains(op.QuantBits, q.Bits) {
			return q, fmt.Sprintf("%s has %d code words per row for in=%d: %d bits per weight, not one of MLX's bit widths %v", w.Name, words, in, q.Bits, op.QuantBits)
		}
	} else {
		for _, m := range op.QuantModes {
			if m.Bits() == q.Bits && m.Group() == q.Group {
				q.Mode = m
			}
		}
		if q.Mode == 0 {
			return q, fmt.Sprintf("%s and %s hold %d-bit codes with U8 scales in groups of %d: no float mode (mxfp4: 4 bits in groups of 32, nvfp4: 4 in 16, mxfp8: 8 in 32)", w.Name, sc.Name, q.Bits, q.Group)
		}
		got.Mode = q.Mode.String()
	}
	if got.Mode != d.Mode || got.Bits != d.Bits || got.Group != d.Group {
		return q, fmt.Sprintf("%s holds %s (its shapes %v and %v, %s scales, for in=%d), but config.json declares %s for %s (%s)",
			w.Name, got.Describe(), w.Shape, sc.Shape, sc.DType, in, d.Describe(), mod, which)
	}
	return q, ""
}

// residentBytes is the memory a quantized module holds once loaded: its codes, scales and biases
// as stored (views of the file), except the one scale of an FP8Tensor weight [n, k], which the
// loader repeats over the weight's block grid (op.BlockFP8 has one scale per block).
func (q QuantTensor) residentBytes(shape []int64, tensors map[string]*safetensors.Tensor) int64 {
	if q.Format == FP8Tensor {
		g := op.FP8Grid(int(shape[0]), int(shape[1]))
		return tensors[q.Weight].ByteSize() + int64(g[0]*g[1]*q.ScaleDType.Size())
	}
	var b int64
	for _, n := range q.Tensors() {
		b += tensors[n].ByteSize()
	}
	return b
}

// checkRegroup refuses FP8 block-scaled matrices whose rows the plan regroups across 128-row
// blocks (Qwen3-Next's grouped in_proj_qkvz, a shared expert's gate and up rows): every part must
// start on a block boundary of its tensor and of the matrix it forms (a part then ends on one too,
// or is the last), so that the copy keeps one scale row per 128 rows. The releases' sizes are
// multiples of 128 (transformers' FP8 quantizer refuses others). Errors wrap
// hfconfig.ErrUnsupported.
func checkRegroup(plan *Plan, quant map[string]QuantTensor) error {
	const B = op.FP8BlockSize
	mats, _ := plan.Walk()
	for _, m := range mats {
		at := 0
		for _, p := range m.Parts {
			if q, ok := quant[p.Tensor]; ok && q.Format == FP8Blocks && (p.Row%B != 0 || at%B != 0) {
				return fmt.Errorf("%w: the plan reads rows [%d, %d) of the FP8 weight %s into rows [%d, %d) of one matrix (%s): its 128 x 128 scale blocks would not line up (FP8 rows are regrouped in whole blocks)",
					hfconfig.ErrUnsupported, p.Row, p.Row+p.Rows, p.Tensor, at, at+p.Rows, m.Role)
			}
			at += p.Rows
		}
	}
	return nil
}
