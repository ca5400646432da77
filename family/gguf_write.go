package family

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/gguf"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// GGUFSource gives a checkpoint's tensors by their names in its Hugging Face layout (the names
// of the plan for Layout l passed to WriteGGUF), as float32 values row-major, one tensor a call.
type GGUFSource interface {
	Float32(name string) ([]float32, error)
}

// CheckpointSource reads a safetensors checkpoint's tensors (widened exactly from bf16 / f16).
type CheckpointSource struct{ CK *safetensors.Checkpoint }

// Float32 returns the tensor called name. Errors name the tensor.
func (s CheckpointSource) Float32(name string) ([]float32, error) {
	t, err := s.CK.Tensor(name)
	if err != nil {
		return nil, err
	}
	return t.Float32()
}

// GGUFMixes are the tensor-type recipes WriteGGUF writes, named as llama-quantize's file types.
var GGUFMixes = []string{"F32", "BF16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0", "IQ4_XS"}

// ggufFileType is llama.cpp's general.file_type (enum llama_ftype) of each mix.
var ggufFileType = map[string]uint32{"F32": 0, "BF16": 32, "Q8_0": 7, "Q6_K": 18, "Q4_K_M": 15, "Q4_0": 2, "IQ4_XS": 30}

// GGUFWriteOptions configures WriteGGUF.
type GGUFWriteOptions struct {
	// Mix is one of GGUFMixes.
	Mix string
	// Name is general.name.
	Name string
	// TokenizerJSON is the path of a tokenizer.json whose tokenizer the file carries
	// (GGUFTokenizer; the pre-tokenizer qwen2 for qwen3next, qwen35 for qwen35 and qwen35moe);
	// "" for none.
	TokenizerJSON string
}

// GGUFArchitecture is the llama.cpp architecture a config converts to: qwen3next, qwen35 or
// qwen35moe. Errors wrap hfconfig.ErrUnsupported.
func GGUFArchitecture(c *hfconfig.Config) (string, error) {
	switch {
	case c.Family == "qwen3_next":
		return "qwen3next", nil
	case c.Family == "qwen3_5" && c.Experts > 0:
		return "qwen35moe", nil
	case c.Family == "qwen3_5":
		return "qwen35", nil
	}
	return "", fmt.Errorf("%w: family %s has no GGUF architecture strata writes (%s)", hfconfig.ErrUnsupported, c.Family, strings.Join(GGUFArchitectures(), ", "))
}

// ggufOut is one tensor of the file: its GGUF name and extents (contiguous first), whether
// llama-quantize quantizes it (a matrix; not a norm, the router, ssm_conv1d), and its values in
// the file's row-major order.
type ggufOut struct {
	name   string
	dims   []uint64
	matrix bool
	layer  int // -1 for the model-level tensors
	values func() ([]float32, error)
}

// WriteGGUF writes the model of config c, whose Hugging Face tensors src gives under the names of
// layout l, to path as llama.cpp's converter (convert_hf_to_gguf.py) and quantizer
// (llama-quantize) would write it: the converter's names, extents and transforms (docs/FORMATS.md,
// section GGUF; family.GGUFPlan undoes each): zero-centred norms stored as 1 + w (float32 sum),
// A_log as ssm_a = -exp(A_log) (float64, rounded once), conv1d squeezed to [C, K], Qwen3-Next's
// in_proj_qkvz regrouped into attn_qkv [q | k | v] and attn_gate (z) with in_proj_ba kept as
// ssm_ba, Qwen3.5's value heads reordered from grouped to tiled where Hk < Hv (the V rows of
// in_proj_qkv, in_proj_z / b / a, A_log, dt_bias, the V channels of conv1d, the columns of
// out_proj), experts stacked [E, I, D] / [E, D, I] (a fused gate_up split), shared_expert_gate
// [D, 1] (1-D [D] in the quantized mixes, as llama-quantize writes it); the metadata keys the
// converter writes for the architecture. Tensor types follow opt.Mix, llama-quantize's rules for
// that file type without an importance matrix (ggufMixType); tensors are ordered as
// llama-quantize orders them (model-level first, then by layer, by name within each).
// One tensor is in memory at a time (the source's values, then its encoding). Errors name the
// file and tensor: an unknown mix, a family without a GGUF architecture, a source error, a
// value the type cannot encode, a tokenizer that does not fit the model (GGUFTokenizer).
func WriteGGUF(path string, c *hfconfig.Config, l Layout, src GGUFSource, opt GGUFWriteOptions) error {
	arch, err := GGUFArchitecture(c)
	if err != nil {
		return err
	}
	if _, ok := ggufFileType[opt.Mix]; !ok {
		return fmt.Errorf("%w: GGUF mix %q (want one of %s)", hfconfig.ErrUnsupported, opt.Mix, strings.Join(GGUFMixes, ", "))
	}
	interval, err := ggufInterval(c)
	if err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	outs := ggufTensors(c, l, arch, src, opt.Mix != "F32" && opt.Mix != "BF16")
	sort.SliceStable(outs, func(i, j int) bool {
		if outs[i].layer != outs[j].layer {
			return outs[i].layer < outs[j].layer
		}
		return outs[i].name < outs[j].name
	})
	nWV := 0
	for _, o := range outs {
		if ggufAttnV(o.name) {
			nWV++
		}
	}
	var tok []gguf.KV
	if opt.TokenizerJSON != "" {
		eos := -1
		if len(c.EOS) > 0 {
			eos = c.EOS[0]
		}
		pre := map[string]string{"qwen3next": "qwen2", "qwen35": "qwen35", "qwen35moe": "qwen35"}[arch]
		if tok, err = GGUFTokenizer(opt.TokenizerJSON, c.Vocab, pre, -1, eos); err != nil {
			return err
		}
	}
	var ts []gguf.WriteTensor
	iWV := 0
	for _, o := range outs {
		typ, err := ggufMixType(opt.Mix, o, c, iWV, nWV)
		if err != nil {
			return fmt.Errorf("gguf: write %s: %w", path, err)
		}
		if ggufAttnV(o.name) {
			iWV++
		}
		ts = append(ts, gguf.WriteTensor{Name: o.name, Dims: o.dims, Type: typ, Data: func() ([]byte, error) {
			x, err := o.values()
			if err != nil {
				return nil, err
			}
			return gguf.Quantize(typ, x, int(o.dims[0]))
		}})
	}
	return gguf.Write(path, append(ggufMetadata(c, arch, interval, opt), tok...), ts)
}

// ggufInterval is full_attention_interval as llama.cpp places the layers ((i+1) % n == 0 is
// attention), from the config's layer types (a config.json may lack the key): the first
// attention layer's index + 1, which every layer's type must then follow. Errors wrap
// hfconfig.ErrUnsupported (layer types llama.cpp's architecture cannot describe).
func ggufInterval(c *hfconfig.Config) (int, error) {
	n := slices.Index(c.LayerTypes, hfconfig.FullAttention) + 1
	if n == 0 {
		n = c.Layers + 1
	}
	for i, t := range c.LayerTypes {
		if (t == hfconfig.FullAttention) != ((i+1)%n == 0) || t != hfconfig.FullAttention && t != hfconfig.LinearAttention {
			return 0, fmt.Errorf("%w: layer %d is %s: llama.cpp places attention every full_attention_interval-th layer, %d here from the first one", hfconfig.ErrUnsupported, i, t, n)
		}
	}
	return n, nil
}

// ggufAttnV: the tensors llama-quantize counts as attention-V-like (attn_v, attn_qkv).
func ggufAttnV(name string) bool {
	return strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".attn_qkv.weight")
}

// ggufUseMoreBits is llama-quantize's choice of the layers that get more bits: the first and
// last eighth, and every third between.
func ggufUseMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// ggufMixType is the type of tensor o in mix, by llama-quantize's rules for these architectures
// (llama.cpp's src/llama-quant.cpp at the commit docs/FORMATS.md names, read, not copied):
// vectors, norms, ffn_gate_inp and ssm_conv1d stay F32; in F32 and BF16 every matrix has that
// type; otherwise the mix's base type (Q8_0, Q6_K, Q4_K, Q4_0, IQ4_XS) with output.weight (or a
// tied token_embd) at Q6_K (Q8_0 when its rows are not whole 256-blocks or in Q8_0), and: for
// Q4_K_M, attn_v / attn_qkv (the iWV-th of nWV in file order) and ffn_down* of layer i at Q6_K
// where use_more_bits says, and with exactly 8 experts attn_v / attn_k at Q8_0 and attn_output at
// Q5_K; for IQ4_XS (no importance matrix), attn_v / attn_qkv at Q5_K when Hq/Hkv >= 4,
// ffn_down* of the first eighth of the layers at Q5_K, and the same 8-expert rules. A
// 256-block type whose rows are not whole blocks falls back as llama-quantize does (Q4_K to
// Q5_0, Q6_K to Q8_0, IQ4_XS to IQ4_NL; Q5_K to Q5_1, which strata does not write: an error),
// then to F16 when rows are not whole 32-blocks either.
func ggufMixType(mix string, o ggufOut, c *hfconfig.Config, iWV, nWV int) (op.GGMLType, error) {
	if !o.matrix {
		return op.GGMLF32, nil
	}
	switch mix {
	case "F32":
		return op.GGMLF32, nil
	case "BF16":
		return op.GGMLBF16, nil
	}
	base := map[string]op.GGMLType{"Q8_0": op.GGMLQ8_0, "Q6_K": op.GGMLQ6_K, "Q4_K_M": op.GGMLQ4_K, "Q4_0": op.GGMLQ4_0, "IQ4_XS": op.GGMLIQ4_XS}[mix]
	t := base
	ncols := int(o.dims[0])
	name := o.name
	switch {
	case name == "output.weight" || name == "token_embd.weight" && c.TieWordEmbeddings:
		switch {
		case ncols%256 != 0:
			t = op.GGMLQ8_0
		case t != op.GGMLQ8_0:
			t = op.GGMLQ6_K
		}
	case name == "token_embd.weight":
	case mix == "IQ4_XS":
		switch {
		case ggufAttnV(name):
			if c.Hkv > 0 && c.Hq/c.Hkv >= 4 {
				t = op.GGMLQ5_K
			}
			if c.Experts == 8 {
				t = op.GGMLQ8_0
			}
		case strings.HasSuffix(name, ".attn_k.weight") && c.Experts == 8:
			t = op.GGMLQ8_0
		case strings.Contains(name, "ffn_down") && o.layer < c.Layers/8:
			t = op.GGMLQ5_K
		case strings.HasSuffix(name, ".attn_output.weight") && c.Experts == 8:
			t = op.GGMLQ5_K
		}
	case mix != "Q4_K_M":
	case ggufAttnV(name):
		if ggufUseMoreBits(iWV, nWV) {
			t = op.GGMLQ6_K
		}
		if c.Experts == 8 {
			t = op.GGMLQ8_0
		}
	case strings.HasSuffix(name, ".attn_k.weight") && c.Experts == 8:
		t = op.GGMLQ8_0
	case strings.Contains(name, "ffn_down"):
		if ggufUseMoreBits(o.layer, c.Layers) {
			t = op.GGMLQ6_K
		}
	case strings.HasSuffix(name, ".attn_output.weight") && c.Experts == 8:
		t = op.GGMLQ5_K
	}
	if ncols%t.BlockSize() != 0 {
		fb := map[op.GGMLType]op.GGMLType{op.GGMLQ4_K: op.GGMLQ5_0, op.GGMLQ6_K: op.GGMLQ8_0, op.GGMLIQ4_XS: op.GGMLIQ4_NL}[t]
		if fb == 0 {
			return 0, fmt.Errorf("%w: tensor %q: rows of %d are not whole %v blocks and its fallback is not written", op.ErrUnsupported, name, ncols, t)
		}
		t = fb
		if ncols%t.BlockSize() != 0 {
			t = op.GGMLF16
		}
	}
	return t, nil
}

// ggufMetadata is the converter's metadata for the architecture and general.file_type.
func ggufMetadata(c *hfconfig.Config, arch string, interval int, opt GGUFWriteOptions) []gguf.KV {
	var kvs []gguf.KV
	put := func(k string, x any) { kvs = append(kvs, gguf.KV{Key: k, Value: gguf.ValueOf(x)}) }
	a := func(k string, v int) { put(arch+"."+k, uint32(v)) }
	put("general.architecture", arch)
	put("general.type", "model")
	if opt.Name != "" {
		put("general.name", opt.Name)
	}
	a("block_count", c.Layers)
	a("context_length", c.MaxPositions)
	a("embedding_length", c.D)
	if c.DenseI > 0 {
		a("feed_forward_length", c.DenseI)
	}
	a("attention.head_count", c.Hq)
	a("attention.head_count_kv", c.Hkv)
	if len(c.MRoPESection) > 0 {
		s := make([]int32, 4)
		for i, v := range c.MRoPESection {
			s[i] = int32(v)
		}
		put(arch+".rope.dimension_sections", s)
	}
	put(arch+".rope.freq_base", float32(c.RopeTheta))
	put(arch+".attention.layer_norm_rms_epsilon", float32(c.Eps))
	if c.Experts > 0 {
		a("expert_count", c.Experts)
		a("expert_used_count", c.TopK)
	}
	a("attention.key_length", c.HeadDim)
	a("attention.value_length", c.HeadDim)
	put("general.file_type", ggufFileType[opt.Mix])
	if c.Experts > 0 {
		a("expert_feed_forward_length", c.MoEI)
		a("expert_shared_feed_forward_length", c.SharedI)
	}
	a("ssm.conv_kernel", c.ConvK)
	a("ssm.state_size", c.Dk)
	a("ssm.group_count", c.Hk)
	a("ssm.time_step_rank", c.Hv)
	a("ssm.inner_size", c.Hv*c.Dv)
	a("full_attention_interval", interval)
	a("rope.dimension_count", c.RotaryDim)
	put("general.quantization_version", uint32(2))
	return kvs
}

// ggufTensors lists the file's tensors with the converter's transforms (see WriteGGUF).
func ggufTensors(c *hfconfig.Config, l Layout, arch string, src GGUFSource, quantized bool) []ggufOut {
	D := uint64(c.D)
	get := src.Float32
	var outs []ggufOut
	add := func(layer int, name string, matrix bool, f func() ([]float32, error), dims ...uint64) {
		outs = append(outs, ggufOut{name: name, dims: dims, matrix: matrix, layer: layer, values: f})
	}
	plain := func(hf string) func() ([]float32, error) { return func() ([]float32, error) { return get(hf) } }
	plus1 := func(hf string) func() ([]float32, error) {
		return func() ([]float32, error) {
			x, err := get(hf)
			for i := range x {
				x[i]++
			}
			return x, err
		}
	}
	add(-1, "token_embd.weight", true, plain(l.Model("embed_tokens.weight")), D, uint64(c.Vocab))
	if !c.TieWordEmbeddings {
		add(-1, "output.weight", true, plain(l.LMHead), D, uint64(c.Vocab))
	}
	add(-1, "output_norm.weight", false, plus1(l.Model("norm.weight")), D)
	Hk, Hv, dk, dv, K := c.Hk, c.Hv, c.Dk, c.Dv, c.ConvK
	r := Hv / max(Hk, 1)
	tiled := arch != "qwen3next" && Hk != Hv
	// vhead is the place of grouped value head h in the converter's tiled order.
	vhead := func(h int) int {
		if !tiled {
			return h
		}
		return (h%r)*Hk + h/r
	}
	// heads reorders the value heads of x, rows of k values: the n rows of each head from row
	// base on.
	heads := func(x []float32, k, n, base int) []float32 {
		out := slices.Clone(x)
		for h := range Hv {
			copy(out[(base+vhead(h)*n)*k:(base+(vhead(h)+1)*n)*k], x[(base+h*n)*k:(base+(h+1)*n)*k])
		}
		return out
	}
	permuted := func(hf string, k, n, base int) func() ([]float32, error) {
		return func() ([]float32, error) {
			x, err := get(hf)
			if err != nil {
				return nil, err
			}
			return heads(x, k, n, base), nil
		}
	}
	C := 2*Hk*dk + Hv*dv
	for i := 0; i < c.Layers; i++ {
		L := func(s string) string { return l.Layer(i, s) }
		B := func(s string) string { return "blk." + strconv.Itoa(i) + "." + s }
		add(i, B("attn_norm.weight"), false, plus1(L("input_layernorm.weight")), D)
		add(i, B("post_attention_norm.weight"), false, plus1(L("post_attention_layernorm.weight")), D)
		if c.LayerTypes[i] == hfconfig.LinearAttention {
			if arch == "qwen3next" {
				// in_proj_qkvz: per qk head [q | k | v of its r heads | z of them]
				grp := 2*dk + 2*r*dv
				qkvz := func(z bool) func() ([]float32, error) {
					return func() ([]float32, error) {
						x, err := get(L("linear_attn.in_proj_qkvz.weight"))
						if err != nil {
							return nil, err
						}
						row := func(h, o, n int) []float32 { return x[(h*grp+o)*c.D : (h*grp+o+n)*c.D] }
						var out []float32
						if z {
							for h := range Hk {
								out = append(out, row(h, 2*dk+r*dv, r*dv)...)
							}
							return out, nil
						}
						for part, o := range []int{0, dk, 2 * dk} {
							for h := range Hk {
								out = append(out, row(h, o, []int{dk, dk, r * dv}[part])...)
							}
						}
						return out, nil
					}
				}
				add(i, B("attn_qkv.weight"), true, qkvz(false), D, uint64(C))
				add(i, B("attn_gate.weight"), true, qkvz(true), D, uint64(Hv*dv))
				add(i, B("ssm_ba.weight"), true, plain(L("linear_attn.in_proj_ba.weight")), D, uint64(2*Hv))
			} else {
				add(i, B("attn_qkv.weight"), true, permuted(L("linear_attn.in_proj_qkv.weight"), c.D, dv, 2*Hk*dk), D, uint64(C))
				add(i, B("attn_gate.weight"), true, permuted(L("linear_attn.in_proj_z.weight"), c.D, dv, 0), D, uint64(Hv*dv))
				add(i, B("ssm_beta.weight"), true, permuted(L("linear_attn.in_proj_b.weight"), c.D, 1, 0), D, uint64(Hv))
				add(i, B("ssm_alpha.weight"), true, permuted(L("linear_attn.in_proj_a.weight"), c.D, 1, 0), D, uint64(Hv))
			}
			add(i, B("ssm_conv1d.weight"), false, permuted(L("linear_attn.conv1d.weight"), K, dv, 2*Hk*dk), uint64(K), uint64(C))
			add(i, B("ssm_a"), false, func() ([]float32, error) {
				x, err := get(L("linear_attn.A_log"))
				if err != nil {
					return nil, err
				}
				for j, v := range x {
					x[j] = float32(-math.Exp(float64(v)))
				}
				return heads(x, 1, 1, 0), nil
			}, uint64(Hv))
			add(i, B("ssm_dt.bias"), false, permuted(L("linear_attn.dt_bias"), 1, 1, 0), uint64(Hv))
			add(i, B("ssm_norm.weight"), false, plain(L("linear_attn.norm.weight")), uint64(dv))
			add(i, B("ssm_out.weight"), true, func() ([]float32, error) {
				x, err := get(L("linear_attn.out_proj.weight")) // [D, Hv*dv]: columns by value head
				if err != nil {
					return nil, err
				}
				out := slices.Clone(x)
				for row := range c.D {
					for h := range Hv {
						copy(out[row*Hv*dv+vhead(h)*dv:row*Hv*dv+(vhead(h)+1)*dv], x[row*Hv*dv+h*dv:row*Hv*dv+(h+1)*dv])
					}
				}
				return out, nil
			}, uint64(Hv*dv), D)
		} else {
			hd := uint64(c.HeadDim)
			add(i, B("attn_q.weight"), true, plain(L("self_attn.q_proj.weight")), D, uint64(c.Hq)*hd*2)
			add(i, B("attn_k.weight"), true, plain(L("self_attn.k_proj.weight")), D, uint64(c.Hkv)*hd)
			add(i, B("attn_v.weight"), true, plain(L("self_attn.v_proj.weight")), D, uint64(c.Hkv)*hd)
			add(i, B("attn_output.weight"), true, plain(L("self_attn.o_proj.weight")), uint64(c.Hq)*hd, D)
			add(i, B("attn_q_norm.weight"), false, plus1(L("self_attn.q_norm.weight")), hd)
			add(i, B("attn_k_norm.weight"), false, plus1(L("self_attn.k_norm.weight")), hd)
		}
		if c.IsMoELayer(i) {
			E, I := uint64(c.Experts), uint64(c.MoEI)
			add(i, B("ffn_gate_inp.weight"), false, plain(L("mlp.gate.weight")), D, E)
			// stacked: which 0 gate, 1 up, 2 down
			stack := func(which int) func() ([]float32, error) {
				return func() ([]float32, error) {
					if l.Experts == Fused {
						if which == 2 {
							return get(L("mlp.experts.down_proj"))
						}
						gu, err := get(L("mlp.experts.gate_up_proj"))
						if err != nil {
							return nil, err
						}
						n := c.MoEI * c.D
						out := make([]float32, 0, c.Experts*n)
						for e := range c.Experts {
							out = append(out, gu[(2*e+which)*n:(2*e+which+1)*n]...)
						}
						return out, nil
					}
					var out []float32
					for e := range c.Experts {
						x, err := get(L(fmt.Sprintf("mlp.experts.%d.%s_proj.weight", e, []string{"gate", "up", "down"}[which])))
						if err != nil {
							return nil, err
						}
						out = append(out, x...)
					}
					return out, nil
				}
			}
			add(i, B("ffn_gate_exps.weight"), true, stack(0), D, I, E)
			add(i, B("ffn_up_exps.weight"), true, stack(1), D, I, E)
			add(i, B("ffn_down_exps.weight"), true, stack(2), I, D, E)
			S := uint64(c.SharedI)
			add(i, B("ffn_gate_shexp.weight"), true, plain(L("mlp.shared_expert.gate_proj.weight")), D, S)
			add(i, B("ffn_up_shexp.weight"), true, plain(L("mlp.shared_expert.up_proj.weight")), D, S)
			add(i, B("ffn_down_shexp.weight"), true, plain(L("mlp.shared_expert.down_proj.weight")), S, D)
			if quantized {
				add(i, B("ffn_gate_inp_shexp.weight"), false, plain(L("mlp.shared_expert_gate.weight")), D)
			} else {
				add(i, B("ffn_gate_inp_shexp.weight"), false, plain(L("mlp.shared_expert_gate.weight")), D, 1)
			}
		} else {
			I := uint64(c.DenseI)
			add(i, B("ffn_gate.weight"), true, plain(L("mlp.gate_proj.weight")), D, I)
			add(i, B("ffn_up.weight"), true, plain(L("mlp.up_proj.weight")), D, I)
			add(i, B("ffn_down.weight"), true, plain(L("mlp.down_proj.weight")), I, D)
		}
	}
	return outs
}
