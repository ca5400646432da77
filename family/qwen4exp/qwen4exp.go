// Package qwen4exp is the Qwen3.8-Flash-Next family (transformers' qwen4_exp, with the text model
// qwen4_exp_text): Gated DeltaNet layers with separate projections and a sigmoid output gate, QSA
// sparse attention (gated GQA whose indexer keeps the top blocks past its budget), 4-stream
// GatedResidual hyper-connections around every block, a hashed n-gram embedding (PLE) added at
// the layers ple_layer_ids name, sparse MoE with a gated shared expert in every layer, and a final
// read-only stream mixer instead of a final norm. The math follows transformers'
// modeling_qwen4_exp.py (v5.17), the defaults its configuration_qwen4_exp.py.
//
// Checkpoint layouts: prefix model. (Qwen4ExpForCausalLM) or model.language_model. (the published
// Qwen4ExpForConditionalGeneration, whose mtp.* and model.visual.* are skipped), experts fused or
// per expert, the n-gram tables whole or split into split_ngram_parts row blocks (shard_{k}), the
// PLE hash buffers checked against the config; the FP8 release (routed experts one by one and the
// n-gram table as F8_E4M3, the table with one scale, ngram_embedding.weight_scale); and mlx-vlm's
// conversions (language_model.model., language_model.lm_head, vision_tower.* skipped, experts
// stacked under switch_mlp, conv1d [C, K, 1] for the GDN and PLE convs, the table shards as
// ngram_embedding.shards.{k}, each quantized on its own, affine or in a float mode). mlx-vlm has
// stored the zero-centred gains both ways (1 + w before its PR #2032, w after; docs/FORMATS.md
// section 2): DetectMore decides per file from the config's preshifted_norm_weights, the
// provenance and the stored values, and refuses a file whose signals disagree.
package qwen4exp

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/op"
)

func init() { family.Register(Family{}) }

// Family is Qwen3.8-Flash-Next.
type Family struct{}

// Name is "qwen4_exp".
func (Family) Name() string { return "qwen4_exp" }

// ModelTypes: qwen4_exp_text (the text model at the top level) and qwen4_exp (multimodal, the
// text model under text_config).
func (Family) ModelTypes() map[string]string {
	return map[string]string{"qwen4_exp_text": "Qwen3.8-Flash-Next", "qwen4_exp": "Qwen3.8-Flash-Next"}
}

// ignored are known qwen4_exp text fields strata does not need.
var ignored = map[string]bool{
	"number_of_conv_states": true, // derived by transformers from ple_layer_ids
	"mrope_section":         true, // text positions make mrope plain RoPE
	"mrope_interleaved":     true,
}

// ReadConfig reads a qwen4_exp_text config, or a qwen4_exp one whose text model is text_config
// (vision_config and the image/video token ids are ignored; tie_word_embeddings and eos_token_id
// are taken from the top level when present there), with Qwen4ExpTextConfig's defaults.
func (Family) ReadConfig(top *hfconfig.Object, c *hfconfig.Config) []string {
	c.LanguageModelOnly = top.Bool("language_model_only", false)
	text := top
	if c.ModelType == "qwen4_exp" {
		sub, ok := top.Sub("text_config")
		if !ok {
			top.Fail("text_config", "model_type qwen4_exp needs a text_config object")
			return nil
		}
		text = sub
		if tmt := text.Str("model_type", "qwen4_exp_text"); tmt != "qwen4_exp_text" {
			return []string{fmt.Sprintf("text_config.model_type %q, want qwen4_exp_text", tmt)}
		}
		if err := hfconfig.ReadQuantization(c, text); err != nil {
			return []string{err.Error()}
		}
	}
	var unsupported []string
	if text.Has("ple_storage") {
		unsupported = append(unsupported, text.Name("ple_storage")+" (mlx-vlm serves the n-gram table from byte ranges of other files; the checkpoint does not hold it)")
	}
	if text.Has("preshifted_norm_weights") {
		v := text.Bool("preshifted_norm_weights", false)
		c.NormsPreshifted = &v
	}
	unsupported = append(unsupported, hfconfig.ReadText(c, text, hfconfig.TextDefaults{Vocab: 248320, D: 2048, Layers: 40, Hq: 16, Hkv: 2, HeadDim: 256,
		MaxPositions: 32768, Hk: 16, Hv: 32, Dk: 128, Dv: 128, ConvK: 4, PartialRotary: 1.0})...)
	c.GateAct = text.Str("output_gate_type", c.GateAct)
	hfconfig.ReadMoE(c, text, hfconfig.MoEDefaults{Experts: 512, TopK: 10, MoEI: 512, SharedI: 512})
	c.DecoderSparseStep = 1
	hfconfig.ReadHyper(c, text, 4, 320)
	hfconfig.ReadPLE(c, text)
	hfconfig.ReadIndexer(c, text)
	// Every qwen4_exp attention layer carries the QSA indexer: the published checkpoint writes
	// "full_attention", other transformers versions the other names.
	sparse := hfconfig.SparseAttention
	hfconfig.ReadLayerTypes(c, text, sparse, map[string]hfconfig.LayerType{
		"linear_attention": hfconfig.LinearAttention, "mamba": hfconfig.LinearAttention,
		"full_attention": sparse, "attention": sparse, "qwen_sparse_attention": sparse,
		"indexed_attention": sparse, "hybrid_indexed": sparse, "deepseek_sparse_attention": sparse,
	})
	text.Unknown(hfconfig.IgnoredFields, ignored)
	if text != top {
		if top.Has("tie_word_embeddings") {
			c.TieWordEmbeddings = top.Bool("tie_word_embeddings", false)
		}
		if eos := top.IntOrInts("eos_token_id"); len(c.EOS) == 0 {
			c.EOS = eos
		}
		top.Unknown(hfconfig.IgnoredFields, hfconfig.VisionFields)
	}
	return unsupported
}

// Validate: every layer is MoE, and the residual has hyper-connection streams.
func (Family) Validate(c *hfconfig.Config) []string {
	var bad []string
	if c.Experts <= 0 {
		bad = append(bad, "qwen4_exp needs num_experts > 0")
	}
	if c.Streams < 2 {
		bad = append(bad, fmt.Sprintf("hc_count = %d: qwen4_exp has at least 2 hyper-connection streams", c.Streams))
	}
	return bad
}

var skips = []family.Skip{
	{Prefix: "mtp.", Reason: "multi-token-prediction head: used in decoding, not by prefill"},
	{Prefix: "model.visual.", Reason: "vision tower: strata prefills text", Vision: true},
}

// Prefixes: model. (the text model's checkpoints), model.language_model. (the published
// multimodal one), and mlx-vlm's language_model.model.
func (Family) Prefixes() []family.Prefix {
	return []family.Prefix{
		{Text: "model.", LMHead: "lm_head.weight", Skipped: skips},
		{Text: "model.language_model.", LMHead: "lm_head.weight", Skipped: skips},
		{Text: "language_model.model.", LMHead: "language_model.lm_head.weight", MLXOnly: true,
			Skipped: []family.Skip{{Prefix: "vision_tower.", Reason: "vision tower: strata prefills text", Vision: true}}},
	}
}

var shardRe = regexp.MustCompile(`^(.*)\.ple\.ple_embedding\.ngram_embedding\.(?:shard_|shards\.)\d+\.weight$`)

// DetectMore completes the layout: split n-gram tables (every PLE layer's table stored as
// split_ngram_parts row blocks, shard_{k} in Hugging Face files and shards.{k} in mlx-vlm's), then
// how the zero-centred gains are stored (detectGains). Errors wrap hfconfig.ErrTensors.
func (f Family) DetectMore(c *hfconfig.Config, l *family.Layout, t family.Table) error {
	parts := map[string]int{}
	for _, n := range t.Names {
		if m := shardRe.FindStringSubmatch(n); m != nil {
			parts[m[1]]++
		}
	}
	if len(parts) > 0 {
		l.NGramParts = c.NGramParts
	}
	layers := make([]string, 0, len(parts))
	for p := range parts {
		layers = append(layers, p)
	}
	sort.Strings(layers)
	for _, p := range layers {
		if parts[p] != c.NGramParts {
			return fmt.Errorf("%w: %s.ple.ple_embedding.ngram_embedding is stored as %d row blocks (shard_{k} or shards.{k}), split_ngram_parts is %d", hfconfig.ErrTensors, p, parts[p], c.NGramParts)
		}
	}
	return detectGains(f, c, l, t)
}

// Plan builds the Qwen3.8-Flash-Next layer plan.
// The zero-centred gains (every hc_norm, the q/k and indexer norms, the PLE norms) are read as
// stored - 1 where the layout says they are stored as 1 + w (Layout.ShiftedGains).
func (Family) Plan(c *hfconfig.Config, l family.Layout) (*family.Plan, error) {
	sh := l.ShiftedGains
	b := family.NewBuilder(c, l)
	p := b.P
	p.Embed = b.Embedding(l.Model("embed_tokens.weight"), c.Vocab, c.D)
	b.Head()
	p.Head.Mixer = b.GR(l.Model("hyper_connection_mixer."), false, sh)
	for i := 0; i < c.Layers; i++ {
		ly := family.Layer{Index: i, Type: c.LayerTypes[i]}
		ly.In.GR = b.GR(l.Layer(i, "attn_hyper_connection."), true, sh)
		ly.Post.GR = b.GR(l.Layer(i, "mlp_hyper_connection."), true, sh)
		if ly.Type == hfconfig.LinearAttention {
			ly.GDN = b.GDN(i)
		} else {
			ly.Attn = b.Attention(i, sh)
			ly.Attn.Indexer = b.Indexer(i, sh)
		}
		b.MLP(&ly)
		if pi := c.PLEIndex(i); pi >= 0 {
			ple, err := pleLayer(b, c, l, i, pi)
			if err != nil {
				return nil, err
			}
			ly.PLE = ple
		}
		p.Layers = append(p.Layers, ly)
	}
	b.Skip()
	return p, p.Check()
}

// pleLayer records the PLE layer of decoder layer i (PLE index pi) and its hash constants.
func pleLayer(b *family.Builder, c *hfconfig.Config, l family.Layout, i, pi int) (*family.PLE, error) {
	D, S := c.D, c.Streams
	heads := c.NGramHeads()
	pl := &family.PLE{Index: pi, Vocab: c.Vocab, NGram: c.NGramSize, HeadsPerNGram: c.HeadsPerNGram, Base: c.NGramVocabBase,
		Divisor: c.NGramVocabDivisor, Seed: c.Seed, EOS: c.EOSToken(),
		S: S, D: D, EmbedDim: c.PLEEmbedDim, HeadDim: c.PLEEmbedDim / heads, ConvK: c.PLEConvK, Dilation: c.NGramSize}
	L := func(s string) string { return l.Layer(i, "ple."+s) }
	pl.Key = b.Linear(L("key_proj.weight"), S*D, c.PLEEmbedDim, "ple")
	pl.Value = b.Linear(L("value_proj.weight"), D, c.PLEEmbedDim, "ple")
	sh := l.ShiftedGains
	pl.NormKey = b.Gain(L("norm_key.weight"), S*D, true, sh)
	pl.NormQuery = b.Gain(L("norm_query.weight"), S*D, true, sh)
	pl.NormConv = b.Gain(L("norm_conv.weight"), S*D, true, sh)
	pl.Conv = b.Conv(L("conv1d.weight"), S*D, c.PLEConvK)
	rows := c.PLEVocabRows(pi)
	// The FP8 release stores the table's codes with one scale for all its row blocks.
	scale := L("ple_embedding.ngram_embedding.weight_scale")
	if parts := l.NGramParts; parts > 1 {
		// Published checkpoints split the n-gram table into equal row blocks shard_{k} (128
		// blocks, 102 GB in Qwen3.8-Flash-Next; mlx-vlm names them shards.{k}): kept as views of
		// the file, never concatenated.
		if rows%parts != 0 {
			return nil, fmt.Errorf("%w: %s: %d rows do not split into %d equal shards", hfconfig.ErrTensors, L("ple_embedding.ngram_embedding"), rows, parts)
		}
		name := "ple_embedding.ngram_embedding.shard_%d.weight"
		if l.MLX {
			name = "ple_embedding.ngram_embedding.shards.%d.weight"
		}
		for k := 0; k < parts; k++ {
			pl.Table = append(pl.Table, b.Table(L(fmt.Sprintf(name, k)), rows/parts, pl.HeadDim, "ngram_table", scale))
		}
	} else {
		pl.Table = []family.Mat{b.Table(L("ple_embedding.ngram_embedding.weight"), rows, pl.HeadDim, "ngram_table", scale)}
	}
	g, err := constants(c, l, i, pi)
	if err != nil {
		return nil, err
	}
	b.P.Constants = append(b.P.Constants, g)
	return pl, nil
}

// constants are the three int64 buffers of transformers' Qwen4ExpTextNGramEmbedding for PLE
// layer pi at decoder layer i: layer_multipliers [ngram_size], ngram_heads_offsets and
// ngram_heads_vocab_sizes [heads]. The published checkpoint stores them (persistent buffers);
// files saved where they are not persistent lack them. strata derives the same values from the
// config (op.NewPLEHash) and checks stored ones against that.
func constants(c *hfconfig.Config, l family.Layout, i, pi int) (family.ConstantGroup, error) {
	h, err := op.NewPLEHash(c.Vocab, c.NGramSize, c.HeadsPerNGram, c.NGramVocabBase, c.NGramVocabDivisor, pi, c.Seed, c.EOSToken())
	if err != nil {
		return family.ConstantGroup{}, fmt.Errorf("%w: PLE layer %d: %v", hfconfig.ErrUnsupported, pi, err)
	}
	base := pi * c.NGramHeads()
	L := func(s string) string { return l.Layer(i, "ple.ple_embedding."+s) }
	return family.ConstantGroup{
		Group:  "ple.ple_embedding.{layer_multipliers,ngram_heads_offsets,ngram_heads_vocab_sizes}",
		Reason: "PLE hash constants: checked equal to what config.json implies (strata derives them)",
		Tensors: []family.Constant{
			{Name: L("layer_multipliers"), Values: h.Mult, Why: func(k int) string {
				return fmt.Sprintf("splitmix64 multiplier %d of seed %d + 10007 * PLE layer %d", k, c.Seed, pi)
			}},
			{Name: L("ngram_heads_offsets"), Values: h.Offset, Why: func(k int) string {
				if k == 0 {
					return "head 0 starts the table"
				}
				return fmt.Sprintf("the sum of the vocabulary sizes of heads 0..%d", k-1)
			}},
			{Name: L("ngram_heads_vocab_sizes"), Values: h.HeadVocab, Why: func(k int) string {
				return fmt.Sprintf("prime number %d >= ngram_vocab_size_base %d", base+k+1, c.NGramVocabBase)
			}},
		},
	}, nil
}
