package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ignoredFields are config.json fields strata knows and does not need: training-only settings,
// bookkeeping, and token ids of the tokenizer other than eos. Checked ones (attention_bias,
// use_sliding_window, rope_scaling) are read, not listed here.
var ignoredFields = map[string]bool{
	"architectures":        true, // read at the top level (Config.Architectures), bookkeeping in text_config
	"transformers_version": true, "_name_or_path": true,
	"initializer_range": true, "router_aux_loss_coef": true, "output_router_logits": true,
	"use_cache": true, "dtype": true, "torch_dtype": true, "attention_dropout": true,
	"bos_token_id": true, "pad_token_id": true,
	// sliding-window fields: meaningful only with use_sliding_window, which must be false.
	"sliding_window": true, "max_window_layers": true,
	// multi-token-prediction head (mtp.* tensors), which prefill does not run; every other
	// mtp_* field is accepted too (see unknown), and the mtp object is checked to be an object.
	"mtp_use_dedicated_embeddings": true,
}

// ignoredQwen4Fields are known qwen4_exp text fields strata does not need.
var ignoredQwen4Fields = map[string]bool{
	"number_of_conv_states": true, // derived by transformers from ple_layer_ids
	"mrope_section":         true, // text positions make mrope plain RoPE
	"mrope_interleaved":     true,
}

// ignoredMultimodalFields are the top-level fields of a qwen4_exp (multimodal) config besides
// text_config: the vision tower and its special tokens, which a text prefill does not use.
var ignoredMultimodalFields = map[string]bool{
	"vision_config": true, "image_token_id": true, "video_token_id": true,
	"vision_start_token_id": true, "vision_end_token_id": true,
}

// object is one JSON object of the config with the keys read so far, so that the keys nobody
// read can be reported.
type object struct {
	where string // "" for the top level, else e.g. "text_config"
	m     map[string]json.RawMessage
	used  map[string]bool
	errs  *[]string
}

func decodeObject(data []byte, where string, errs *[]string) (*object, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrConfig, orTop(where), err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrConfig, orTop(where))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: trailing data after the JSON object", ErrConfig, orTop(where))
	}
	return &object{where: where, m: m, used: map[string]bool{}, errs: errs}, nil
}

func orTop(where string) string {
	if where == "" {
		return "config"
	}
	return where
}

func (o *object) name(key string) string {
	if o.where == "" {
		return key
	}
	return o.where + "." + key
}

func (o *object) fail(key, format string, args ...any) {
	*o.errs = append(*o.errs, o.name(key)+": "+fmt.Sprintf(format, args...))
}

// get marks key as read and returns its value; JSON null counts as absent (transformers writes
// null for unset optional fields).
func (o *object) get(key string) (json.RawMessage, bool) {
	o.used[key] = true
	v, ok := o.m[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

func (o *object) has(key string) bool { _, ok := o.get(key); return ok }

func (o *object) int(key string, def int) int {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	n, err := parseInt(v)
	if err != nil {
		o.fail(key, "%v", err)
		return def
	}
	return n
}

func parseInt(v json.RawMessage) (int, error) {
	s := string(bytes.TrimSpace(v))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Python writes 4.0 for a float-typed integer; accept integral floats only.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("want an integer, got %s", s)
		}
		return int(f), nil
	}
	return int(n), nil
}

func (o *object) float(key string, def float64) float64 {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
	if err != nil {
		o.fail(key, "want a number, got %s", v)
		return def
	}
	return f
}

func (o *object) bool(key string, def bool) bool {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		o.fail(key, "want true or false, got %s", v)
		return def
	}
	return b
}

func (o *object) str(key, def string) string {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.fail(key, "want a string, got %s", v)
		return def
	}
	return s
}

func (o *object) ints(key string, def []int) []int {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		o.fail(key, "want a list of integers, got %s", v)
		return def
	}
	out := make([]int, 0, len(raw))
	for _, r := range raw {
		n, err := parseInt(r)
		if err != nil {
			o.fail(key, "%v", err)
			return def
		}
		out = append(out, n)
	}
	return out
}

// intOrInts reads a field that is an int or a list of ints (eos_token_id).
func (o *object) intOrInts(key string) []int {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	if n, err := parseInt(v); err == nil {
		return []int{n}
	}
	return o.ints(key, nil)
}

func (o *object) strs(key string) ([]string, bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	var s []string
	if err := json.Unmarshal(v, &s); err != nil {
		o.fail(key, "want a list of strings, got %s", v)
		return nil, false
	}
	return s, true
}

// unknown reports keys neither read nor in one of the ignore lists. Keys starting with "mtp_"
// belong to the multi-token-prediction head, which prefill does not run, and are accepted.
func (o *object) unknown(ignore ...map[string]bool) {
	var bad []string
	for k := range o.m {
		if o.used[k] || strings.HasPrefix(k, "mtp_") {
			continue
		}
		known := false
		for _, ig := range ignore {
			known = known || ig[k]
		}
		if !known {
			bad = append(bad, o.name(k))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		*o.errs = append(*o.errs, "unknown fields "+strings.Join(bad, ", "))
	}
}

// Parse parses a config.json. qwen3_next and qwen4_exp_text configs are read at the top level;
// a qwen4_exp config reads its text model from text_config (vision_config and the image/video
// token ids are ignored; tie_word_embeddings is taken from the top level when present there).
// The result is validated (see Validate). Errors wrap ErrConfig (malformed JSON, wrong types,
// unknown fields, broken invariants; all problems found are listed in one error) or
// ErrUnsupported (another model_type, a quantized checkpoint, RoPE scaling, attention biases,
// ...), which names the unsupported value. An MLX quantization block (mlx_lm.convert's, without
// quant_method) is read into Config.Quant (qwen3_next; MLX conversions of qwen4_exp are refused
// by name).
func Parse(data []byte) (*Config, error) {
	var errs []string
	top, err := decodeObject(data, "", &errs)
	if err != nil {
		return nil, err
	}
	mt := top.str("model_type", "")
	c := &Config{ModelType: mt}
	switch mt {
	case "qwen3_next":
		c.Arch = Qwen3Next
	case "qwen4_exp_text", "qwen4_exp":
		c.Arch = Qwen4Exp
	case "":
		return nil, fmt.Errorf("%w: model_type is missing", ErrConfig)
	default:
		return nil, unsupportedModelType(mt)
	}
	q, err := checkQuantization(top)
	if err != nil {
		return nil, err
	}
	c.Quant = q
	c.Architectures, _ = top.strs("architectures")
	c.LanguageModelOnly = top.bool("language_model_only", false)
	var unsupported []string
	switch mt {
	case "qwen3_next":
		unsupported = readText(c, top)
		top.unknown(ignoredFields)
	case "qwen4_exp_text":
		unsupported = readText(c, top)
		top.unknown(ignoredFields, ignoredQwen4Fields)
	case "qwen4_exp":
		raw, ok := top.get("text_config")
		if !ok {
			return nil, fmt.Errorf("%w: model_type qwen4_exp needs a text_config object", ErrConfig)
		}
		text, err := decodeObject(raw, "text_config", &errs)
		if err != nil {
			return nil, err
		}
		if tmt := text.str("model_type", "qwen4_exp_text"); tmt != "qwen4_exp_text" {
			return nil, fmt.Errorf("%w: text_config.model_type %q, want qwen4_exp_text", ErrUnsupported, tmt)
		}
		tq, err := checkQuantization(text)
		if err != nil {
			return nil, err
		}
		if c.Quant == nil {
			c.Quant = tq
		}
		unsupported = readText(c, text)
		text.unknown(ignoredFields, ignoredQwen4Fields)
		if top.has("tie_word_embeddings") {
			c.TieWordEmbeddings = top.bool("tie_word_embeddings", false)
		}
		if eos := top.intOrInts("eos_token_id"); len(c.EOS) == 0 {
			c.EOS = eos
		}
		top.unknown(ignoredFields, ignoredMultimodalFields)
	}
	if c.Quant != nil && c.Arch == Qwen4Exp {
		return nil, errMLXQwen4(fmt.Sprintf("config.json has an MLX quantization block (%s)", c.Quant.Describe()))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	if len(unsupported) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, strings.Join(unsupported, "; "))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// otherModelTypes names model types users try that strata does not run.
var otherModelTypes = map[string]string{
	"qwen3_5":     "Qwen3.5 (dense)",
	"qwen3_5_moe": "Qwen3.5 MoE",
	"qwen3_moe":   "Qwen3 MoE",
	"qwen3":       "Qwen3 (dense)",
	"qwen2_moe":   "Qwen2 MoE",
}

func unsupportedModelType(mt string) error {
	what := ""
	if name, ok := otherModelTypes[mt]; ok {
		what = ", " + name + ","
	}
	return fmt.Errorf("%w: model_type %q%s is not supported: strata runs qwen3_next (Qwen3-Next), qwen4_exp_text and qwen4_exp (Qwen3.8-Flash-Next)", ErrUnsupported, mt, what)
}

// readText fills c from the text model's fields in o, with the defaults of the transformers
// class of c.Arch. Type errors go to o.errs; requests strata cannot serve are returned.
func readText(c *Config, o *object) (unsupported []string) {
	q4 := c.Arch == Qwen4Exp
	pick := func(q3, q4v int) int {
		if q4 {
			return q4v
		}
		return q3
	}
	c.Vocab = o.int("vocab_size", pick(151936, 248320))
	c.D = o.int("hidden_size", 2048)
	c.Layers = o.int("num_hidden_layers", pick(48, 40))
	c.Hq = o.int("num_attention_heads", 16)
	c.Hkv = o.int("num_key_value_heads", 2)
	c.HeadDim = o.int("head_dim", 256)
	c.MaxPositions = o.int("max_position_embeddings", 32768)
	c.Eps = o.float("rms_norm_eps", 1e-6)
	c.TieWordEmbeddings = o.bool("tie_word_embeddings", false)
	c.Hk = o.int("linear_num_key_heads", 16)
	c.Hv = o.int("linear_num_value_heads", 32)
	c.Dk = o.int("linear_key_head_dim", 128)
	c.Dv = o.int("linear_value_head_dim", 128)
	c.ConvK = o.int("linear_conv_kernel_dim", 4)
	c.Experts = o.int("num_experts", 512)
	c.TopK = o.int("num_experts_per_tok", 10)
	c.MoEI = o.int("moe_intermediate_size", 512)
	c.SharedI = o.int("shared_expert_intermediate_size", 512)
	c.NormTopK = o.bool("norm_topk_prob", true)
	c.EOS = o.intOrInts("eos_token_id")
	c.MTPLayers = o.int("mtp_num_hidden_layers", o.int("num_nextn_predict_layers", 0))
	if v, ok := o.get("mtp"); ok {
		var head map[string]json.RawMessage
		if err := json.Unmarshal(v, &head); err != nil || head == nil {
			o.fail("mtp", "want an object (the multi-token-prediction head), got %s", v)
		}
	}
	// The GDN recurrent state: strata keeps it in float32, as transformers does.
	if st := o.str("mamba_ssm_dtype", "float32"); st != "float32" {
		unsupported = append(unsupported, fmt.Sprintf("%s %q (strata keeps the Gated DeltaNet state in float32)", o.name("mamba_ssm_dtype"), st))
	}

	act := o.str("hidden_act", "silu")
	if act != "silu" {
		unsupported = append(unsupported, fmt.Sprintf("%s %q (strata implements silu MLPs)", o.name("hidden_act"), act))
	}
	c.GateAct = act
	if q4 {
		c.GateAct = o.str("output_gate_type", act)
	}
	if o.bool("attention_bias", false) {
		unsupported = append(unsupported, o.name("attention_bias")+" true (strata's attention has no biases)")
	}
	if o.bool("use_sliding_window", false) {
		unsupported = append(unsupported, o.name("use_sliding_window")+" true")
	}
	unsupported = append(unsupported, readRope(c, o)...)

	if q4 {
		c.DecoderSparseStep = 1
		c.Streams = o.int("hc_count", 4)
		c.HCRank = o.int("hc_lowrank", 320)
		ids := o.ints("ple_layer_ids", nil)
		c.PLELayerIDs = sortedUnique(ids)
		c.PLEEmbedDim = o.int("ple_embed_dim", c.D)
		c.PLEConvK = o.int("ple_conv_kernel_size", 4)
		c.NGramSize = o.int("ngram_size", 3)
		c.HeadsPerNGram = o.int("heads_per_ngram", 8)
		c.NGramVocabBase = o.int("ngram_vocab_size_base", 20_000_000)
		c.NGramVocabDivisor = o.int("make_ngram_vocab_size_divisible_by", 128)
		c.NGramParts = o.int("split_ngram_parts", 512)
		c.Seed = int64(o.int("seed", 1234))
		c.IdxHeads = o.int("indexer_n_heads", 0)
		c.IdxKVHeads = o.int("indexer_kv_heads", 0)
		c.IdxDim = o.int("indexer_head_dim", 0)
		c.IdxBudget = o.int("indexer_budget", 0)
		c.IdxRatio = o.int("indexer_compress_ratio", 0)
	} else {
		c.Streams = 1
		c.DenseI = o.int("intermediate_size", 5632)
		c.DecoderSparseStep = o.int("decoder_sparse_step", 1)
		c.MLPOnlyLayers = o.ints("mlp_only_layers", []int{})
	}
	readLayerTypes(c, o)
	return unsupported
}

// readRope reads rope_parameters and the legacy top-level rope_theta, partial_rotary_factor and
// rope_scaling. A value given in both places must agree. Defaults: theta 10000 (transformers'
// default), partial_rotary_factor 0.25 for qwen3_next and 1.0 for qwen4_exp (whose config class
// skips the 0.25 default of its parent).
func readRope(c *Config, o *object) (unsupported []string) {
	theta, prf := 10000.0, 0.25
	if c.Arch == Qwen4Exp {
		prf = 1.0
	}
	legacyTheta, hasLegacyTheta := o.float("rope_theta", 0), o.has("rope_theta")
	legacyPRF, hasLegacyPRF := o.float("partial_rotary_factor", 0), o.has("partial_rotary_factor")
	if v, ok := o.get("rope_scaling"); ok {
		unsupported = append(unsupported, fmt.Sprintf("%s %s (strata implements plain RoPE)", o.name("rope_scaling"), v))
	}
	if hasLegacyTheta {
		theta = legacyTheta
	}
	if hasLegacyPRF {
		prf = legacyPRF
	}
	if raw, ok := o.get("rope_parameters"); ok {
		rp, err := decodeObject(raw, o.name("rope_parameters"), o.errs)
		if err != nil {
			o.fail("rope_parameters", "not a JSON object")
		} else {
			if t := rp.str("rope_type", "default"); t != "default" {
				unsupported = append(unsupported, fmt.Sprintf("%s %q (strata implements plain RoPE)", rp.name("rope_type"), t))
			}
			if rp.has("rope_theta") {
				v := rp.float("rope_theta", theta)
				if hasLegacyTheta && v != legacyTheta {
					rp.fail("rope_theta", "%v disagrees with top-level rope_theta %v", v, legacyTheta)
				}
				theta = v
			}
			if rp.has("partial_rotary_factor") {
				v := rp.float("partial_rotary_factor", prf)
				if hasLegacyPRF && v != legacyPRF {
					rp.fail("partial_rotary_factor", "%v disagrees with top-level partial_rotary_factor %v", v, legacyPRF)
				}
				prf = v
			}
			rp.unknown(map[string]bool{"mrope_section": true, "mrope_interleaved": true})
		}
	}
	c.RopeTheta = theta
	if prf <= 0 || prf > 1 {
		o.fail("partial_rotary_factor", "%v outside (0, 1]", prf)
	}
	c.RotaryDim = int(float64(c.HeadDim) * prf)
	return unsupported
}

// readLayerTypes reads layer_types, or derives them from full_attention_interval (default 4)
// as transformers does: layer i is attention iff (i+1) % interval == 0. Legacy names are mapped
// as transformers maps them: "attention" -> full, "mamba" -> linear; in qwen4_exp every
// attention layer carries the QSA indexer, so "full_attention" (written by the published
// checkpoint) and the names other transformers versions write ("indexed_attention",
// "hybrid_indexed", "deepseek_sparse_attention") all mean qwen_sparse_attention.
func readLayerTypes(c *Config, o *object) {
	interval := o.int("full_attention_interval", 4)
	attn := FullAttention
	if c.Arch == Qwen4Exp {
		attn = SparseAttention
	}
	names, ok := o.strs("layer_types")
	if !ok {
		if interval <= 0 {
			o.fail("full_attention_interval", "%d must be positive", interval)
			return
		}
		if c.Layers < 0 || c.Layers > 1<<16 {
			return // Validate reports the layer count
		}
		c.LayerTypes = make([]LayerType, c.Layers)
		for i := range c.LayerTypes {
			c.LayerTypes[i] = LinearAttention
			if (i+1)%interval == 0 {
				c.LayerTypes[i] = attn
			}
		}
		return
	}
	c.LayerTypes = make([]LayerType, len(names))
	for i, n := range names {
		switch {
		case n == "linear_attention" || n == "mamba":
			c.LayerTypes[i] = LinearAttention
		case n == "full_attention" || n == "attention":
			c.LayerTypes[i] = attn
		case c.Arch == Qwen4Exp && qsaAliases[n]:
			c.LayerTypes[i] = SparseAttention
		default:
			o.fail("layer_types", "layer %d: unknown type %q for %s", i, n, c.Arch)
		}
	}
}

// qsaAliases are the layer_types names transformers versions give qwen4_exp's QSA layers.
var qsaAliases = map[string]bool{
	"qwen_sparse_attention": true, "indexed_attention": true, "hybrid_indexed": true, "deepseek_sparse_attention": true,
}

func sortedUnique(v []int) []int {
	if v == nil {
		return []int{}
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
