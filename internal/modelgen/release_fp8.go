package modelgen

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// The published FP8 releases, assembled from their bf16 releases by the rules docs/FORMATS.md section
// 4 gives for each (what is FP8, the scale tensors and their shapes and dtypes, the
// quantization_config's keys): no public source lists either release's full tensor table or, for
// Qwen3.8-Flash-Next-FP8, its full config.json, so the tables and the modules_to_not_convert lists
// are derived, not transcribed. Where the sources are silent the choice is stated: Qwen3-Next's
// shard count (the bf16 release's 41 shards halved, 21) and the shape [1] of Qwen3.8's n-gram
// table's one scale. Qwen3.8's mtp head has its routed experts in FP8 too: with them the table
// totals 185.5 GB, the size reported for the release (bf16 they would make it 188.0 GB).

func init() {
	Releases["qwen3-next-80b-a3b-instruct-fp8"] = Release{Name: "qwen3-next-80b-a3b-instruct-fp8", Shards: 21,
		config:  func() map[string]any { return withFP8(qwen3NextConfig(), qwen3NextFP8Tensors(), true) },
		tensors: qwen3NextFP8Tensors}
	Releases["qwen3.8-flash-next-fp8"] = Release{Name: "qwen3.8-flash-next-fp8", Shards: 131,
		config:  func() map[string]any { return withFP8(flashNextConfig(), flashNextFP8Tensors(), false) },
		tensors: flashNextFP8Tensors}
}

// qwen3NextFP8Keep are the Linear modules Qwen3-Next-80B-A3B-Instruct-FP8 keeps in bf16 besides
// the embedding (its modules_to_not_convert, by dotted parts).
var qwen3NextFP8Keep = []string{"lm_head", "mlp.gate", "mlp.shared_expert_gate", "linear_attn.in_proj_ba", "mtp.fc"}

// fp8Linear converts the 2-D ".weight" tensor t of a table to F8_E4M3 codes with their BF16
// weight_scale_inv grid, appended to out.
func fp8Linear(out []safetensors.WriteTensor, t safetensors.WriteTensor) []safetensors.WriteTensor {
	g := op.FP8Grid(int(t.Shape[0]), int(t.Shape[1]))
	t.DType = safetensors.F8E4M3
	return append(out, t, safetensors.WriteTensor{Name: strings.TrimSuffix(t.Name, ".weight") + ".weight_scale_inv", DType: safetensors.BF16,
		Shape: []int64{int64(g[0]), int64(g[1])}})
}

// qwen3NextFP8Tensors is the bf16 release's table with every Linear weight but the embedding and
// the modules of qwen3NextFP8Keep as FP8 (the mtp head's too).
func qwen3NextFP8Tensors() []safetensors.WriteTensor {
	keep := &hfconfig.FP8Quant{NotConvert: qwen3NextFP8Keep}
	var out []safetensors.WriteTensor
	for _, t := range qwen3NextTensors() {
		mod := strings.TrimSuffix(t.Name, ".weight")
		if _, kept := keep.Excluded(mod); len(t.Shape) == 2 && mod != t.Name && !kept && !strings.HasSuffix(mod, "embed_tokens") {
			out = fp8Linear(out, t)
			continue
		}
		out = append(out, t)
	}
	return out
}

// flashNextFP8Tensors is the bf16 release's table with the routed experts of every decoder layer
// and of the mtp head
// stored one by one as FP8 (mlp.experts.{e}.{gate,up,down}_proj.weight [640, 2560], [640, 2560],
// [2560, 640] with BF16 weight_scale_inv [5, 20], [5, 20], [20, 5]) and the n-gram table's 128
// row blocks as F8_E4M3 sharing one BF16 ngram_embedding.weight_scale; the mtp head's experts
// likewise.
func flashNextFP8Tensors() []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	scaled := false
	for _, t := range flashNextTensors() {
		switch {
		case strings.HasSuffix(t.Name, ".mlp.experts.gate_up_proj"):
			pre := strings.TrimSuffix(t.Name, "gate_up_proj")
			E, I2, D := t.Shape[0], t.Shape[1], t.Shape[2]
			for e := int64(0); e < E; e++ {
				p := pre + strconv.FormatInt(e, 10) + "."
				out = fp8Linear(out, safetensors.WriteTensor{Name: p + "gate_proj.weight", Shape: []int64{I2 / 2, D}})
				out = fp8Linear(out, safetensors.WriteTensor{Name: p + "up_proj.weight", Shape: []int64{I2 / 2, D}})
				out = fp8Linear(out, safetensors.WriteTensor{Name: p + "down_proj.weight", Shape: []int64{D, I2 / 2}})
			}
		case strings.HasSuffix(t.Name, ".mlp.experts.down_proj"):
			// written with gate_up_proj, one expert at a time
		case strings.Contains(t.Name, ".ple_embedding.ngram_embedding.shard_"):
			if !scaled {
				base := t.Name[:strings.Index(t.Name, "ngram_embedding.")]
				out = append(out, safetensors.WriteTensor{Name: base + "ngram_embedding.weight_scale", DType: safetensors.BF16, Shape: []int64{1}})
				scaled = true
			}
			t.DType = safetensors.F8E4M3
			out = append(out, t)
		default:
			out = append(out, t)
		}
	}
	return out
}

// withFP8 adds the FP8 quantization_config to a release's config.json: modules_to_not_convert
// lists the module of every tensor of ts left in float: with qwen3Next (Qwen3-Next's list) every
// tensor's of the text model and the mtp head but the embedding and the final norm, which its
// list omits; else (Qwen3.8's) every 2-D weight's, the embedding's included. modules_to_convert
// names the n-gram table where ts stores it as FP8 with one scale; Qwen3-Next's config has fmt,
// Qwen3.8's weight_per_tensor and act_per_tensor.
func withFP8(cfg map[string]any, ts []safetensors.WriteTensor, qwen3Next bool) map[string]any {
	var notConvert []string
	convert := false
	for _, t := range ts {
		mod, weight := strings.CutSuffix(t.Name, ".weight")
		switch {
		case t.DType == safetensors.F8E4M3 || t.DType == safetensors.I64 || strings.HasSuffix(t.Name, "weight_scale_inv"):
		case strings.HasSuffix(t.Name, "ngram_embedding.weight_scale"):
			convert = true
		case qwen3Next:
			if mod != "model.embed_tokens" && mod != "model.norm" {
				notConvert = append(notConvert, mod)
			}
		case weight && len(t.Shape) == 2:
			notConvert = append(notConvert, mod)
		}
	}
	sort.Strings(notConvert)
	qc := map[string]any{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": []any{128, 128},
		"modules_to_not_convert": slices.Compact(notConvert)}
	if qwen3Next {
		qc["fmt"] = "e4m3"
	} else {
		qc["weight_per_tensor"], qc["act_per_tensor"] = false, false
	}
	if convert {
		qc["modules_to_convert"] = []any{"ple.ple_embedding.ngram_embedding"}
	}
	cfg["quantization_config"] = qc
	return cfg
}
