package hfconfig

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// MLX conversions (FORMATS.md section 2). mlx_lm.convert rewrites a Hugging Face qwen3_next
// checkpoint for MLX's modules: it drops mtp.* (and lm_head when embeddings are tied), stacks the
// experts into mlp.switch_mlp.{gate,up,down}_proj.weight, moves linear_attn.conv1d.weight from
// [C, 1, K] to [C, K, 1], stores the zero-centred norms (input_layernorm, post_attention_layernorm,
// model.norm, self_attn.q_norm, self_attn.k_norm) as 1 + w because MLX's RMSNorm multiplies by its
// weight as it is (linear_attn.norm is a plain weight in both), saves with safetensors metadata
// {"format": "mlx"} and, when quantizing, writes the quantization block and every quantized
// module as <module>.weight (U32 codes), <module>.scales and <module>.biases. Reading such a file
// as a Hugging Face one doubles those norms silently, so provenance is decided once, from every
// signal, and signals that disagree are an error.

// errMLXQwen4 refuses an MLX conversion of qwen4_exp, naming the signal that revealed it.
func errMLXQwen4(signal string) error {
	return fmt.Errorf("%w: an MLX conversion of qwen4_exp (mlx-vlm; %s) is not supported: which of its norms "+
		"(hc_norm, the PLE norms, q/k and indexer norms) it stores as 1 + w, and how it names and quantizes the "+
		"hyper-connection and PLE tensors, is pinned by no test; strata reads qwen4_exp from Hugging Face checkpoints",
		ErrUnsupported, signal)
}

// shiftedNorms are the name suffixes of the norm weights an MLX conversion of qwen3_next stores
// as 1 + w (mlx_lm's qwen3_next sanitize).
var shiftedNorms = []string{".input_layernorm.weight", ".post_attention_layernorm.weight", ".self_attn.q_norm.weight", ".self_attn.k_norm.weight"}

// ShiftedNorm reports whether the tensor called name holds 1 + w for the norm weight w the model
// uses: the pre-norms, the final norm and the attention q/k norms of an MLX conversion
// (linear_attn.norm is stored plain). A loader reads such a weight as stored - 1.
func (l Layout) ShiftedNorm(name string) bool {
	if !l.MLX {
		return false
	}
	if name == l.Model("norm.weight") {
		return true
	}
	if !strings.HasPrefix(name, l.Prefix+"layers.") {
		return false
	}
	for _, s := range shiftedNorms {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// DetectMLX decides whether a checkpoint is an MLX conversion from every signal it carries and
// sets l.MLX: the safetensors metadata format ("mlx" or transformers' "pt"), an MLX quantization
// block in config.json, the expert layout (switch_mlp or transformers' experts.*), the shape of
// linear_attn.conv1d.weight ([C, K, 1] or [C, 1, K]) and mtp.* tensors (which mlx_lm drops).
// Signals pointing both ways are an error wrapping ErrTensors that lists them; an MLX qwen4_exp
// checkpoint is ErrUnsupported.
func (c *Config) DetectMLX(l *Layout, files []*safetensors.File, shapes map[string][]int64) error {
	var mlx, hf []string
	for _, f := range files {
		switch format := f.Metadata["format"]; format {
		case "mlx":
			mlx = append(mlx, fmt.Sprintf("%s metadata format \"mlx\"", baseName(f.Path)))
		case "pt":
			hf = append(hf, fmt.Sprintf("%s metadata format \"pt\"", baseName(f.Path)))
		}
	}
	if c.Quant != nil {
		mlx = append(mlx, "config.json quantization block without quant_method")
	}
	if l.SwitchMLP {
		mlx = append(mlx, "experts stacked under mlp.switch_mlp")
	}
	if l.FusedExperts {
		hf = append(hf, "experts under mlp.experts.gate_up_proj")
	}
	moe := false
	for i := range c.LayerTypes {
		moe = moe || c.IsMoELayer(i)
	}
	if moe && !l.FusedExperts && !l.SwitchMLP {
		hf = append(hf, "experts stored one by one (mlp.experts.{e}.*)")
	}
	for i, t := range c.LayerTypes {
		if t != LinearAttention || c.ConvK <= 1 {
			continue
		}
		name := l.Layer(i, "linear_attn.conv1d.weight")
		if s := shapes[name]; len(s) == 3 {
			switch {
			case s[1] == int64(c.ConvK) && s[2] == 1:
				mlx = append(mlx, fmt.Sprintf("%s %v (channels, kernel, 1)", name, s))
			case s[1] == 1 && s[2] == int64(c.ConvK):
				hf = append(hf, fmt.Sprintf("%s %v (channels, 1, kernel)", name, s))
			}
		}
		break // the first GDN layer speaks for all: CheckTensors holds the others to its shape
	}
	for n := range shapes {
		if strings.HasPrefix(n, "mtp.") {
			hf = append(hf, "mtp.* tensors (mlx_lm.convert drops them)")
			break
		}
	}
	slices.Sort(mlx)
	mlx = slices.Compact(mlx)
	slices.Sort(hf)
	hf = slices.Compact(hf)
	if len(mlx) > 0 && len(hf) > 0 {
		return fmt.Errorf("%w: the checkpoint is neither clearly an MLX conversion nor a Hugging Face checkpoint (the two store the pre-norms differently, 1 + w against w): MLX signals: %s; Hugging Face signals: %s",
			ErrTensors, strings.Join(mlx, ", "), strings.Join(hf, ", "))
	}
	l.MLX = len(mlx) > 0
	if l.MLX && c.Arch == Qwen4Exp {
		return errMLXQwen4(strings.Join(mlx, ", "))
	}
	return nil
}

func baseName(p string) string { return p[strings.LastIndexAny(p, `/\`)+1:] }

// QuantTensor is one quantized module of an MLX checkpoint: the names of its U32 codes, scales
// and biases, and the bit width and group size its shapes give (checked against config.json).
type QuantTensor struct {
	Weight, Scales, Biases string
	Bits, Group            int
	ScaleDType             safetensors.DType // BF16 or F16, the dtype of scales and biases
}

// resolveQuant finds the quantized modules of the tensor table: a Linear spec is quantized
// exactly when <module>.scales exists. For each it checks the codes (U32 [..., out, in*bits/32]),
// the scales and biases (BF16 or F16, one dtype, [..., out, in/group]), derives bits and group
// from those shapes and compares them with what config.json declares for the module (its own
// entry, else the defaults); it also refuses scales on a norm, conv or vector, entries for
// modules the model does not have, and disagreements between an entry and the tensors. It
// returns the quantized modules by weight name and the table with each quantized module
// described by its logical shape (codes unpacked, scales and biases removed), for CheckTensors.
// Errors wrap ErrTensors and name the tensors.
func (c *Config) resolveQuant(specs []Spec, tensors map[string]*safetensors.Tensor, shapes map[string][]int64) (map[string]QuantTensor, map[string][]int64, error) {
	quant := map[string]QuantTensor{}
	logical := make(map[string][]int64, len(shapes))
	for n, s := range shapes {
		logical[n] = s
	}
	var bad []string
	modules := map[string]bool{}
	for _, sp := range specs {
		mod := sp.Module()
		if sp.Linear {
			modules[mod] = true
		}
		sc, bi, w := tensors[mod+".scales"], tensors[mod+".biases"], tensors[sp.Name]
		if sc == nil {
			if sp.Linear && c.Quant != nil {
				if d, own := c.Quant.For(mod); own && d.Quantized && w != nil {
					bad = append(bad, fmt.Sprintf("config.json quantizes %s (%d bits, group size %d), but %s.scales is missing", mod, d.Bits, d.Group, mod))
				}
			}
			continue
		}
		if !sp.Linear {
			bad = append(bad, fmt.Sprintf("%s.scales: %s is quantized, but only Linear and Embedding weights can be (norms, convolutions and gate vectors stay float)", mod, sp.Name))
			continue
		}
		if w == nil {
			continue // reported missing by CheckTensors (the scales and biases as unexpected)
		}
		q, problem := c.quantModule(sp, w, sc, bi)
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
		return nil, nil, fmt.Errorf("%w: %d quantized-module problems: %s", ErrTensors, len(bad), cutList(bad, 8))
	}
	return quant, logical, nil
}

// quantModule checks one quantized module (weight w with scales sc and biases bi) against its
// logical shape sp.Shape [..., out, in] and the config, returning it or a problem naming the
// tensors.
func (c *Config) quantModule(sp Spec, w, sc, bi *safetensors.Tensor) (QuantTensor, string) {
	mod := sp.Module()
	q := QuantTensor{Weight: w.Name, Scales: sc.Name, Biases: mod + ".biases"}
	if c.Quant == nil {
		return q, fmt.Sprintf("%s and %s.scales: quantized tensors, but config.json has no quantization block", w.Name, mod)
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
	if sc.DType != safetensors.BF16 && sc.DType != safetensors.F16 {
		return q, fmt.Sprintf("%s is %s, want BF16 or F16 scales", sc.Name, sc.DType)
	}
	if len(sc.Shape) != n || !slices.Equal(sc.Shape[:n-1], lead) || sc.Shape[n-1] <= 0 {
		return q, fmt.Sprintf("%s has shape %v, want %v + [in/group] for the logical weight %v", sc.Name, sc.Shape, lead, sp.Shape)
	}
	if bi == nil {
		return q, fmt.Sprintf("%s is missing (mode affine stores a bias per group beside %s)", q.Biases, sc.Name)
	}
	if bi.DType != sc.DType || !slices.Equal(bi.Shape, sc.Shape) {
		return q, fmt.Sprintf("%s is %s %v, want the dtype and shape of %s (%s %v)", bi.Name, bi.DType, bi.Shape, sc.Name, sc.DType, sc.Shape)
	}
	q.ScaleDType = sc.DType
	groups := sc.Shape[n-1]
	if in%groups != 0 {
		return q, fmt.Sprintf("%s holds %d groups per row, which do not divide in=%d of %s (the group size must divide the input width)", sc.Name, groups, in, w.Name)
	}
	q.Group = int(in / groups)
	if !slices.Contains(op.QuantGroups, q.Group) {
		return q, fmt.Sprintf("%s gives group size %d (in=%d / %d groups), want one of %v", sc.Name, q.Group, in, groups, op.QuantGroups)
	}
	words := w.Shape[n-1]
	if words*32%in != 0 || !slices.Contains(op.QuantBits, int(words*32/in)) {
		return q, fmt.Sprintf("%s has %d code words per row for in=%d: %d/%d bits per weight, not one of MLX's bit widths %v", w.Name, words, in, words*32, in, op.QuantBits)
	}
	q.Bits = int(words * 32 / in)
	if q.Bits != d.Bits || q.Group != d.Group {
		return q, fmt.Sprintf("%s holds %d-bit codes in groups of %d (its shapes %v and %v for in=%d), but config.json declares %d bits in groups of %d for %s (%s)",
			w.Name, q.Bits, q.Group, w.Shape, sc.Shape, in, d.Bits, d.Group, mod, which)
	}
	return q, ""
}

// cutList joins up to n of the items, then " and N more".
func cutList(items []string, n int) string {
	s := append([]string(nil), items...)
	slices.Sort(s)
	if len(s) > n {
		return strings.Join(s[:n], "; ") + fmt.Sprintf("; and %d more", len(s)-n)
	}
	return strings.Join(s, "; ")
}
