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
	"github.com/stratakernels/strata/op"
)

// ggufArch is how one llama.cpp architecture maps onto a family: the family, the model_type the
// Config carries, and the converter class whose transforms the plan undoes (docs/FORMATS.md,
// section GGUF).
type ggufArch struct {
	family, modelType string
	moe               bool // experts in every layer (qwen3next: per layer, from the tensors)
	// split: the GDN projections as attn_qkv, attn_gate, ssm_beta, ssm_alpha (Qwen3.5), else
	// attn_qkv, attn_gate and the fused ssm_ba grouped per qk head (Qwen3-Next).
	split bool
	// tiled: the converter reorders the value heads from grouped to tiled when Hk < Hv.
	tiled bool
}

var ggufArchs = map[string]ggufArch{
	"qwen3next": {family: "qwen3_next", modelType: "qwen3_next", moe: true},
	"qwen35":    {family: "qwen3_5", modelType: "qwen3_5_text", split: true, tiled: true},
	"qwen35moe": {family: "qwen3_5", modelType: "qwen3_5_moe_text", moe: true, split: true, tiled: true},
}

// GGUFArchitectures lists the llama.cpp architectures GGUFConfig reads, sorted.
func GGUFArchitectures() []string {
	out := make([]string, 0, len(ggufArchs))
	for a := range ggufArchs {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// GGUFConfig reads the model's config from a GGUF file's metadata (general.architecture and the
// <arch>.* keys llama.cpp's converter writes) and its tensor table (the vocabulary from
// token_embd, tied embeddings from a missing output.weight, Qwen3-Next's dense-MLP layers from
// their tensors), then validates it as family.Parse does. The layer kinds come from
// <arch>.full_attention_interval, as llama.cpp places them ((i+1) % n == 0 is attention); a file
// whose tensors say otherwise for some layer is refused naming the layer (the converter writes 4
// when config.json lacked the key). The decoder layers are <arch>.block_count less
// <arch>.nextn_predict_layers (the MTP layers the converter appends). Errors wrap
// hfconfig.ErrConfig (a key absent or of another type, values that break an invariant; the
// message names the file and key) or hfconfig.ErrUnsupported (an architecture strata does not
// map, named, with the ones it does; RoPE scaling).
func GGUFConfig(f *gguf.File) (*hfconfig.Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", hfconfig.ErrConfig, err)
	}
	a, ok := ggufArchs[arch]
	if !ok {
		what := ""
		if strings.HasPrefix(arch, "qwen4") {
			what = " (Qwen3.8-Flash-Next: its GGUF layout, with hyper-connections, the QSA indexer's split q/k projections and the PLE n-gram table, is not mapped yet; load its Hugging Face or MLX directory)"
		}
		return nil, fmt.Errorf("%w: %s: GGUF architecture %q%s is not supported: strata maps %s", hfconfig.ErrUnsupported, f.Path, arch, what, strings.Join(GGUFArchitectures(), ", "))
	}
	var bad []string
	key := func(k string) string { return arch + "." + k }
	geti := func(k string, def int64) int {
		v, err := f.Int(key(k))
		if err != nil {
			if _, present := f.Lookup(key(k)); !present && def >= 0 {
				return int(def)
			}
			bad = append(bad, err.Error())
			return 0
		}
		if v < 0 || v > math.MaxInt32 {
			bad = append(bad, fmt.Sprintf("%s = %d out of range", key(k), v))
			return 0
		}
		return int(v)
	}
	getf := func(k string) float64 {
		v, err := f.Float(key(k))
		if err != nil {
			bad = append(bad, err.Error())
		}
		return v
	}
	c := &hfconfig.Config{Family: a.family, ModelType: a.modelType, Architectures: []string{"gguf:" + arch}}
	blocks := geti("block_count", -1)
	c.MTPLayers = geti("nextn_predict_layers", 0)
	c.Layers = blocks - c.MTPLayers
	c.D = geti("embedding_length", -1)
	c.MaxPositions = geti("context_length", -1)
	c.Hq = geti("attention.head_count", -1)
	c.Hkv = geti("attention.head_count_kv", -1)
	c.HeadDim = geti("attention.key_length", -1)
	if v := geti("attention.value_length", -1); v != c.HeadDim {
		bad = append(bad, fmt.Sprintf("%s %d differs from %s %d (strata's attention has one head size)", key("attention.value_length"), v, key("attention.key_length"), c.HeadDim))
	}
	c.RotaryDim = geti("rope.dimension_count", -1)
	c.RopeTheta = getf("rope.freq_base")
	c.Eps = getf("attention.layer_norm_rms_epsilon")
	c.ConvK = geti("ssm.conv_kernel", -1)
	c.Dk = geti("ssm.state_size", -1)
	c.Hk = geti("ssm.group_count", -1)
	c.Hv = geti("ssm.time_step_rank", -1)
	if inner := geti("ssm.inner_size", -1); c.Hv > 0 && inner%c.Hv == 0 {
		c.Dv = inner / c.Hv
	} else {
		bad = append(bad, fmt.Sprintf("%s %d is not a multiple of %s %d", key("ssm.inner_size"), inner, key("ssm.time_step_rank"), c.Hv))
	}
	c.GateAct = "silu"
	c.Streams = 1
	c.FullAttentionInterval = geti("full_attention_interval", -1)
	if _, present := f.Lookup(key("rope.dimension_sections")); present {
		s, err := f.Ints(key("rope.dimension_sections"))
		if err != nil {
			bad = append(bad, err.Error())
		}
		for i, v := range s {
			if i < 3 {
				c.MRoPESection = append(c.MRoPESection, int(v))
			} else if v != 0 {
				bad = append(bad, fmt.Sprintf("%s %v: a fourth section is not a text model's", key("rope.dimension_sections"), s))
			}
		}
	}
	if st, err := f.String(key("rope.scaling.type")); err == nil && st != "none" {
		return nil, fmt.Errorf("%w: %s: %s %q (RoPE scaling) is not supported", hfconfig.ErrUnsupported, f.Path, key("rope.scaling.type"), st)
	}
	if a.moe {
		c.Experts = geti("expert_count", -1)
		c.TopK = geti("expert_used_count", -1)
		c.MoEI = geti("expert_feed_forward_length", -1)
		c.SharedI = geti("expert_shared_feed_forward_length", -1)
		c.NormTopK = true // llama.cpp's qwen3next and qwen35moe graphs renormalise the top-k weights
		c.DecoderSparseStep = 1
	}
	if !a.moe || a.family == "qwen3_next" {
		c.DenseI = geti("feed_forward_length", 0)
	}
	if eos, err := f.Int("tokenizer.ggml.eos_token_id"); err == nil {
		c.EOS = []int{int(eos)}
	}
	emb := f.Tensor("token_embd.weight")
	if emb == nil || len(emb.Dims) != 2 {
		bad = append(bad, "token_embd.weight is missing or not a matrix")
	} else {
		c.Vocab = int(min(emb.Dims[1], math.MaxInt32))
	}
	c.TieWordEmbeddings = f.Tensor("output.weight") == nil
	if len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", hfconfig.ErrConfig, f.Path, strings.Join(bad, "; "))
	}
	if c.Layers < 1 || c.Layers > 1024 {
		return nil, fmt.Errorf("%w: %s: %s %d less %s %d leaves %d decoder layers", hfconfig.ErrConfig, f.Path, key("block_count"), blocks, key("nextn_predict_layers"), c.MTPLayers, c.Layers)
	}
	n := c.FullAttentionInterval
	if n < 1 {
		return nil, fmt.Errorf("%w: %s: %s %d must be positive", hfconfig.ErrConfig, f.Path, key("full_attention_interval"), n)
	}
	for i := 0; i < c.Layers; i++ {
		t := hfconfig.LinearAttention
		if (i+1)%n == 0 {
			t = hfconfig.FullAttention
		}
		c.LayerTypes = append(c.LayerTypes, t)
		hasAttn := f.Tensor(fmt.Sprintf("blk.%d.attn_q.weight", i)) != nil
		hasGDN := f.Tensor(fmt.Sprintf("blk.%d.ssm_out.weight", i)) != nil
		if hasAttn == hasGDN || hasAttn != (t == hfconfig.FullAttention) {
			return nil, fmt.Errorf("%w: %s: %s %d makes layer %d %s, but its tensors hold %s (the converter writes 4 when config.json lacks full_attention_interval: the file describes another model than its tensors)",
				hfconfig.ErrTensors, f.Path, key("full_attention_interval"), n, i, map[bool]string{true: "an attention layer", false: "a GDN layer"}[t == hfconfig.FullAttention],
				map[[2]bool]string{{true, false}: "attention (attn_q)", {false, true}: "a GDN layer (ssm_out)", {true, true}: "both attn_q and ssm_out", {false, false}: "neither attn_q nor ssm_out"}[[2]bool{hasAttn, hasGDN}])
		}
		if a.family == "qwen3_next" && f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", i)) == nil {
			c.MLPOnlyLayers = append(c.MLPOnlyLayers, i)
		}
	}
	fam, _ := Lookup(c.Family)
	if bad := fam.Validate(c); len(bad) > 0 {
		return nil, fmt.Errorf("%w: %s: %s", hfconfig.ErrConfig, f.Path, strings.Join(bad, "; "))
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return c, nil
}

// GGUFPlan builds the plan of a model read by GGUFConfig from a GGUF file of its architecture,
// with llama.cpp's tensor names and shapes (row-major: a GGUF matrix of extents [K, N] is
// [N, K]) and every transform of llama.cpp's converter undone where strata's math expects the
// source's values (docs/FORMATS.md, section GGUF):
//   - the zero-centred norms (attn_norm, post_attention_norm, output_norm, attn_q_norm,
//     attn_k_norm) are stored as 1 + w: read as stored - 1 (Vec.Shifted); ssm_norm is plain;
//   - ssm_a holds -exp(A_log): read as log(-stored) (Vec.NegExp);
//   - ssm_conv1d is [C, K] (squeezed), the same memory order as transformers' [C, 1, K];
//   - Qwen3-Next's in_proj_qkvz is stored regrouped as attn_qkv [q | k | v] and attn_gate (z):
//     the split projections, views of the file; ssm_ba keeps in_proj_ba's grouping per qk head,
//     regrouped into b and a as for the Hugging Face file (a copy of 2*Hv rows);
//   - Qwen3.5's value heads are stored tiled when Hk < Hv: the GDN runs with op.Tiled, so the
//     weights stay views (no permutation) and the recurrent state holds the heads in that order;
//   - experts stacked [E, I, D] / [E, D, I] (ffn_{gate,up,down}_exps; Qwen3.5-MoE's fused
//     gate_up split in two by the converter): one view per expert;
//   - ffn_gate_inp_shexp is [1, D], or 1-D [D] after llama-quantize (read as [1, D]);
//   - the dense MLP's and the shared expert's gate and up (ffn_gate, ffn_up, ffn_{gate,up}_shexp)
//     stay apart (Dense.Up): views of the file, multiplied one by one.
//
// The MTP layers the converter appends (blk.N for N >= layers) are skipped.
func GGUFPlan(c *hfconfig.Config, arch string) (*Plan, error) {
	a, ok := ggufArchs[arch]
	if !ok || a.family != c.Family {
		return nil, fmt.Errorf("%w: GGUF architecture %q for family %s", hfconfig.ErrUnsupported, arch, c.Family)
	}
	l := Layout{Prefix: Prefix{LMHead: "output.weight"}, Experts: Stacked, ShiftedGains: true, GGUF: arch}
	b := NewBuilder(c, l)
	p := b.P
	D := c.D
	p.Embed = b.Embedding("token_embd.weight", c.Vocab, D)
	if c.TieWordEmbeddings {
		p.Head.LMHead = p.Embed
	} else {
		p.Head.LMHead = b.Linear("output.weight", c.Vocab, D, "lm_head")
	}
	norm := b.Gain("output_norm.weight", D, true, true)
	p.Head.Norm = &norm
	for i := 0; i < c.Layers; i++ {
		L := func(s string) string { return "blk." + strconv.Itoa(i) + "." + s }
		ly := Layer{Index: i, Type: c.LayerTypes[i]}
		in := b.Gain(L("attn_norm.weight"), D, true, true)
		post := b.Gain(L("post_attention_norm.weight"), D, true, true)
		ly.In.Norm, ly.Post.Norm = &in, &post
		if ly.Type == hfconfig.LinearAttention {
			g := b.gdnSizes()
			if a.tiled && g.Hk != g.Hv {
				g.Map = op.Tiled
			}
			C := g.Channels()
			g.QKV = b.Linear(L("attn_qkv.weight"), C, D, "linear_attn")
			g.Z = b.Linear(L("attn_gate.weight"), g.Hv*g.Dv, D, "linear_attn")
			if a.split {
				g.B = b.Linear(L("ssm_beta.weight"), g.Hv, D, "linear_attn")
				g.A = b.Linear(L("ssm_alpha.weight"), g.Hv, D, "linear_attn")
			} else {
				r := g.Hv / g.Hk
				ba := b.Linear(L("ssm_ba.weight"), 2*g.Hv, D, "linear_attn")
				var bs, as []Mat
				for h := 0; h < g.Hk; h++ {
					bs = append(bs, ba.Sub(h*2*r, r))
					as = append(as, ba.Sub(h*2*r+r, r))
				}
				g.B, g.A = Rows("linear_attn", bs...), Rows("linear_attn", as...)
			}
			b.spec(L("ssm_conv1d.weight"), false, InitConv, int64(C), int64(g.ConvK))
			g.Conv = Vec{Tensor: L("ssm_conv1d.weight"), Len: C * g.ConvK}
			g.DtBias = b.Vector(L("ssm_dt.bias"), g.Hv, InitDtBias)
			b.spec(L("ssm_a"), false, InitALog, int64(g.Hv))
			g.ALog = Vec{Tensor: L("ssm_a"), Len: g.Hv, NegExp: true}
			g.Norm = b.Gain(L("ssm_norm.weight"), g.Dv, false, false)
			g.Out = b.Linear(L("ssm_out.weight"), D, g.Hv*g.Dv, "linear_attn")
			ly.GDN = g
		} else {
			hd := c.HeadDim
			at := &Attention{Hq: c.Hq, Hkv: c.Hkv, HeadDim: hd, Rot: c.RotaryDim, Theta: c.RopeTheta}
			at.Q = b.Linear(L("attn_q.weight"), c.Hq*hd*2, D, "self_attn")
			at.K = b.Linear(L("attn_k.weight"), c.Hkv*hd, D, "self_attn")
			at.V = b.Linear(L("attn_v.weight"), c.Hkv*hd, D, "self_attn")
			at.O = b.Linear(L("attn_output.weight"), D, c.Hq*hd, "self_attn")
			at.QNorm = b.Gain(L("attn_q_norm.weight"), hd, true, true)
			at.KNorm = b.Gain(L("attn_k_norm.weight"), hd, true, true)
			ly.Attn = at
		}
		if c.IsMoELayer(i) {
			E, I := c.Experts, c.MoEI
			m := &MoE{E: E, TopK: c.TopK, I: I, NormTopK: c.NormTopK}
			m.Router = b.Linear(L("ffn_gate_inp.weight"), E, D, "router")
			m.GateUp = b.Stacked(L("ffn_gate_exps.weight"), E, I, D, "experts")
			m.Up = b.Stacked(L("ffn_up_exps.weight"), E, I, D, "experts")
			m.Down = b.Stacked(L("ffn_down_exps.weight"), E, D, I, "experts")
			gate := b.Linear(L("ffn_gate_shexp.weight"), c.SharedI, D, "shared_expert")
			up := b.Linear(L("ffn_up_shexp.weight"), c.SharedI, D, "shared_expert")
			m.Shared = Dense{I: c.SharedI, GateUp: gate, Up: &up, Down: b.Linear(L("ffn_down_shexp.weight"), D, c.SharedI, "shared_expert")}
			m.SharedGate = b.Linear(L("ffn_gate_inp_shexp.weight"), 1, D, "shared_expert_gate")
			ly.MoE = m
		} else {
			gate := b.Linear(L("ffn_gate.weight"), c.DenseI, D, "mlp")
			up := b.Linear(L("ffn_up.weight"), c.DenseI, D, "mlp")
			ly.MLP = &Dense{I: c.DenseI, GateUp: gate, Up: &up, Down: b.Linear(L("ffn_down.weight"), D, c.DenseI, "mlp")}
		}
		p.Layers = append(p.Layers, ly)
	}
	for i := c.Layers; i < c.Layers+c.MTPLayers; i++ {
		p.Skipped = append(p.Skipped, Skip{Prefix: "blk." + strconv.Itoa(i) + ".", Reason: "multi-token-prediction layer (nextn): used in decoding, not by prefill"})
	}
	return p, p.Check()
}

// GGUFTypeUse is one tensor type among the tensors of a GGUF file the model reads.
type GGUFTypeUse struct {
	Type    op.GGMLType
	Tensors int
	Bytes   int64
}

// CheckGGUF checks a GGUF file's tensor table against the config and returns the plan for it,
// as CheckCheckpoint does for a safetensors checkpoint: every tensor of the plan present with
// its shape (ffn_gate_inp_shexp also 1-D [D]), nothing else besides the skipped MTP layers;
// the vectors (norms, ssm_a, ssm_dt, ssm_conv1d) F32, F16 or BF16; the matrices F32, F16, BF16
// or a block type of op.GGMLBlockTypes. Every tensor of another type is refused, named with its
// type (an IQ2_XXS file's tensors, say), in one error. res.DTypes name ggml types. Errors wrap
// hfconfig.ErrTensors or hfconfig.ErrUnsupported.
func CheckGGUF(c *hfconfig.Config, f *gguf.File) (*CheckResult, error) {
	arch, _ := f.String("general.architecture")
	plan, err := GGUFPlan(c, arch)
	if err != nil {
		return nil, err
	}
	res := &CheckResult{Plan: plan, Quant: map[string]QuantTensor{}}
	shapes := map[string][]int64{}
	for _, t := range f.Tensors() {
		res.Tensors++
		res.Bytes += t.Bytes
		s := t.Shape()
		if strings.HasSuffix(t.Name, ".ffn_gate_inp_shexp.weight") && len(s) == 1 {
			s = []int64{1, s[0]} // llama-quantize squeezes [D, 1] to [D]
		}
		shapes[t.Name] = s
	}
	if err := checkTensors(plan, shapes); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	uses := map[op.GGMLType]*GGUFTypeUse{}
	var refused []string
	refusedBy := map[op.GGMLType]int{}
	for _, s := range plan.Tensors {
		t := f.Tensor(s.Name)
		float := t.Type == op.GGMLF32 || t.Type == op.GGMLF16 || t.Type == op.GGMLBF16
		if !float && (!s.Linear || !slices.Contains(op.GGMLBlockTypes, t.Type)) {
			refusedBy[t.Type]++
			refused = append(refused, fmt.Sprintf("%s %v", s.Name, t.Type))
			continue
		}
		u := uses[t.Type]
		if u == nil {
			u = &GGUFTypeUse{Type: t.Type}
			uses[t.Type] = u
		}
		u.Tensors++
		u.Bytes += t.Bytes
		res.Used++
		res.UsedBytes += t.Bytes
		if s.Linear {
			res.ResidentBytes += t.Bytes
		} else {
			res.ResidentBytes += 4 * t.Elements
		}
	}
	if len(refused) > 0 {
		var kinds []string
		for ty, n := range refusedBy {
			kinds = append(kinds, fmt.Sprintf("%d %v", n, ty))
		}
		sort.Strings(kinds)
		return nil, fmt.Errorf("%w: %s: %d tensors of types strata does not run (%s; strata runs F32, F16, BF16 and %v on matrices, F32, F16 and BF16 on vectors): %s",
			hfconfig.ErrUnsupported, f.Path, len(refused), strings.Join(kinds, ", "), op.GGMLBlockTypes, cut(refused))
	}
	for _, u := range uses {
		res.DTypes = append(res.DTypes, DTypeUse{DType: u.Type.String(), Tensors: u.Tensors, Bytes: u.Bytes})
	}
	sort.Slice(res.DTypes, func(i, j int) bool {
		if res.DTypes[i].Bytes != res.DTypes[j].Bytes {
			return res.DTypes[i].Bytes > res.DTypes[j].Bytes
		}
		return res.DTypes[i].DType < res.DTypes[j].DType
	})
	for _, s := range plan.Skipped {
		g := SkippedGroup{Group: s.Prefix + "*", Reason: s.Reason}
		for _, t := range f.Tensors() {
			if strings.HasPrefix(t.Name, s.Prefix) {
				g.Tensors++
				g.Bytes += t.Bytes
			}
		}
		if g.Tensors > 0 {
			res.Skipped = append(res.Skipped, g)
		}
	}
	return res, nil
}
