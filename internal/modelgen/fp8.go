package modelgen

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/modelgen/genreg"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// FP8Options say which modules an FP8 copy stores as F8_E4M3 and how its quantization_config
// reads, as one of the published FP8 releases is laid out (genreg.FP8Options).
type FP8Options = genreg.FP8Options

// FP8Releases are the layouts of the published FP8 releases (docs/FORMATS.md section 4), by
// release, as the families register them (family/NAME/gen). Every one stores 128 x 128 blocks.
var FP8Releases = genreg.FP8Releases

// ConvertFP8 writes an FP8 copy of the unquantized Hugging Face checkpoint in src into dst, laid
// out as o says: the routed experts stored one by one (mlp.experts.{e}.{gate,up,down}_proj, as
// both releases store them), each converted Linear weight [N, K] as F8_E4M3 codes with
// <module>.weight_scale_inv [ceil(N/128), ceil(K/128)] (transformers' fine-grained quantizer:
// fp8Blocks), each converted table with its one scale (fp8Tensor), everything else as in src,
// the constant tensors kept. config.json gains quantization_config {quant_method fp8,
// activation_scheme dynamic, weight_block_size [128, 128], modules_to_not_convert (sorted), and
// as o says fmt, modules_to_convert, weight_per_tensor / act_per_tensor} at its top level; the
// weights go to model.safetensors (metadata format "pt") beside its index. The copy is read back
// (family.CheckCheckpoint) and every module converted must be read as FP8.
func ConvertFP8(src, dst string, o FP8Options) error {
	return ConvertFP8Context(context.Background(), src, dst, o)
}

// ConvertFP8Context is ConvertFP8 that stops when ctx is done, between two source matrices
// while reading, two tensors while converting, or before the write (which runs to its end),
// with ctx's error: what it leaves in dst is then no checkpoint (no config.json, which is
// written last).
func ConvertFP8Context(ctx context.Context, src, dst string, o FP8Options) error {
	raw, err := readConfig(src)
	if err != nil {
		return err
	}
	res, ck, err := openPlan(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	sp := res.Plan
	if sp.Layout.MLX || len(res.Quant) > 0 {
		return fmt.Errorf("modelgen: ConvertFP8: %s is not an unquantized Hugging Face checkpoint", src)
	}
	if o.ScaleDType != safetensors.BF16 && o.ScaleDType != safetensors.F32 {
		return fmt.Errorf("modelgen: ConvertFP8: scale dtype %q (want BF16 or F32)", o.ScaleDType)
	}
	cfg := sp.Config
	dl := sp.Layout
	dl.Experts = family.PerExpert
	dp, err := family.Of(cfg).Plan(cfg, dl)
	if err != nil {
		return err
	}
	w, err := mapPlan(ctx, ck, res, dp, false)
	if err != nil {
		return err
	}
	roles := map[string]string{}
	mats, _ := dp.Walk()
	for _, m := range mats {
		for _, p := range m.Parts {
			roles[p.Tensor] = m.Role
		}
	}
	keep := &hfconfig.FP8Quant{NotConvert: o.Keep}
	var notConvert, convert []string
	tables := map[string][]family.Spec{} // by whole-tensor scale
	converted := map[string]bool{}
	for _, s := range dp.Tensors {
		if err := ctx.Err(); err != nil {
			return err
		}
		mod := s.Module()
		_, kept := keep.Excluded(mod)
		role := roles[s.Name]
		switch {
		case !s.Linear:
			if o.ListVectors {
				notConvert = append(notConvert, mod)
			}
		case s.Embedding:
			if o.Tables && s.TensorScale != "" {
				tables[s.TensorScale] = append(tables[s.TensorScale], s)
			} else {
				notConvert = append(notConvert, mod)
			}
		case kept || role == "lm_head" || o.Roles != nil && !slices.Contains(o.Roles, role) || len(s.Shape) != 2:
			notConvert = append(notConvert, mod)
		default:
			t := w[s.Name]
			codes, inv := fp8Blocks(t.vals, int(s.Shape[0]), int(s.Shape[1]), o.ScaleDType)
			g := op.FP8Grid(int(s.Shape[0]), int(s.Shape[1]))
			w[s.Name] = &mlxTensor{dtype: safetensors.F8E4M3, shape: slices.Clone(s.Shape), raw: codes, params: t.params}
			w[mod+".weight_scale_inv"] = &mlxTensor{dtype: o.ScaleDType, shape: []int64{int64(g[0]), int64(g[1])}, vals: inv, params: int64(len(inv))}
			converted[s.Name] = true
		}
	}
	for scale, specs := range tables {
		amax := float32(0)
		for _, s := range specs {
			for _, v := range w[s.Name].vals {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
		}
		var sv float32
		for _, s := range specs {
			t := w[s.Name]
			var codes []uint8
			codes, sv = fp8Tensor(t.vals, amax, o.ScaleDType)
			w[s.Name] = &mlxTensor{dtype: safetensors.F8E4M3, shape: slices.Clone(s.Shape), raw: codes, params: t.params}
			converted[s.Name] = true
		}
		w[scale] = &mlxTensor{dtype: o.ScaleDType, shape: []int64{1}, vals: []float32{sv}, params: 1}
		convert = append(convert, layerRelative(dl, strings.TrimSuffix(scale, ".weight_scale")))
	}
	if err := copyConstants(ck, sp, dp, w); err != nil {
		return err
	}
	sort.Strings(notConvert)
	convert = slices.Compact(slices.Sorted(slices.Values(convert)))
	qc := map[string]any{"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": []int{op.FP8BlockSize, op.FP8BlockSize},
		"modules_to_not_convert": notConvert}
	if o.Fmt {
		qc["fmt"] = "e4m3"
	}
	if o.PerTensorFlags {
		qc["weight_per_tensor"], qc["act_per_tensor"] = false, false
	}
	if len(convert) > 0 {
		qc["modules_to_convert"] = convert
	}
	raw["quantization_config"] = qc
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := writeTensors(dst, raw, w, "pt"); err != nil {
		return err
	}
	back, bck, err := openPlan(dst)
	if err != nil {
		return fmt.Errorf("modelgen: the FP8 copy does not load: %w", err)
	}
	defer bck.Close()
	for n := range converted {
		if _, ok := back.Quant[n]; !ok {
			return fmt.Errorf("modelgen: the FP8 copy's %s is not read as FP8", n)
		}
	}
	if len(back.Quant) != len(converted) {
		return fmt.Errorf("modelgen: the FP8 copy has %d FP8 modules, %d were converted", len(back.Quant), len(converted))
	}
	return nil
}

// layerRelative is a module path inside its decoder layer ("ple.ple_embedding.ngram_embedding"),
// as the releases' modules_to_convert names it; a model-level path is returned as it is.
func layerRelative(l family.Layout, path string) string {
	rest, ok := strings.CutPrefix(path, l.Text+"layers.")
	if !ok {
		return path
	}
	if _, after, ok := strings.Cut(rest, "."); ok {
		return after
	}
	return path
}
