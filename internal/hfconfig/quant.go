package hfconfig

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// quantMethods describes the quant_method values of the quantized releases users download, so
// that a refusal says what the file is. Any other quant_method is refused too, by its name.
var quantMethods = map[string]string{
	"fp8":                "FP8 block-scaled weights, F8_E4M3 with weight_scale_inv",
	"modelopt":           "NVIDIA ModelOpt, NVFP4 or FP8",
	"compressed-tensors": "compressed-tensors packing, NVFP4, INT4 or FP8",
	"auto-round":         "Intel AutoRound",
	"awq":                "AWQ 4-bit",
	"gptq":               "GPTQ",
	"bitsandbytes":       "bitsandbytes",
}

// checkQuantization refuses a quantized checkpoint by name before any other field is read, so
// that the user learns what the file is rather than a list of fields strata does not know.
// It looks at quantization_config and quantization in o (the top level, or text_config):
//   - quantization_config with quant_method X: ErrUnsupported "quantization method X is not
//     supported", with what is known about X (algorithm, bits, block size);
//   - a quantization block, or a quantization_config without quant_method: an MLX quantized
//     checkpoint (mlx_lm.convert writes both keys), refused by mlxQuantization.
//
// Both keys are marked read. It returns nil when neither key is present (or both are null).
func checkQuantization(o *object) error {
	qc, hasQC := o.get("quantization_config")
	mlx, hasMLX := o.get("quantization")
	if !hasQC && !hasMLX {
		return nil
	}
	if hasQC {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(qc, &m); err != nil || m == nil {
			return fmt.Errorf("%w: %s: want an object, got %s", ErrConfig, o.name("quantization_config"), clip(qc))
		}
		if raw, ok := m["quant_method"]; ok {
			var method string
			if err := json.Unmarshal(raw, &method); err != nil {
				return fmt.Errorf("%w: %s.quant_method: want a string, got %s", ErrConfig, o.name("quantization_config"), clip(raw))
			}
			var what []string
			for _, w := range []string{quantMethods[method], quantDetails(m)} {
				if w != "" {
					what = append(what, w)
				}
			}
			detail := ""
			if len(what) > 0 {
				detail = ": " + strings.Join(what, "; ")
			}
			return fmt.Errorf("%w: %s: quantization method %q is not supported (strata runs bf16, f16 or f32 checkpoints)%s", ErrUnsupported, o.name("quantization_config"), method, detail)
		}
		if !hasMLX {
			mlx, hasMLX = qc, true
		}
	}
	return mlxQuantization(o.name("quantization"), mlx)
}

// mlxQuantization is the refusal of MLX quantized checkpoints (FORMATS.md section 2: a
// quantization block {group_size, bits, mode} plus per-module overrides, U32-packed weights
// with scales and biases). This is the one place that decides it: support for MLX checkpoints
// replaces this function.
func mlxQuantization(where string, block json.RawMessage) error {
	var q struct {
		Bits      *int    `json:"bits"`
		GroupSize *int    `json:"group_size"`
		Mode      *string `json:"mode"`
	}
	detail := ""
	if err := json.Unmarshal(block, &q); err == nil {
		var parts []string
		mode := "affine" // mlx_lm's default when the key is absent
		if q.Mode != nil {
			mode = *q.Mode
		}
		parts = append(parts, "mode "+mode)
		if q.Bits != nil {
			parts = append(parts, fmt.Sprintf("%d bits", *q.Bits))
		}
		if q.GroupSize != nil {
			parts = append(parts, fmt.Sprintf("group size %d", *q.GroupSize))
		}
		detail = " (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Errorf("%w: %s: MLX quantized checkpoints are not supported yet%s: strata runs bf16, f16 or f32 checkpoints", ErrUnsupported, where, detail)
}

// quantDetails lists the scalar fields of a quantization_config that say what the weights are
// (bits, group or block size, algorithm, format), sorted by key; nested objects are left out.
func quantDetails(m map[string]json.RawMessage) string {
	keys := []string{"quant_algo", "format", "bits", "num_bits", "group_size", "weight_block_size", "fmt", "activation_scheme"}
	var parts []string
	for _, k := range keys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		switch v.(type) {
		case string, float64, bool, []any:
			parts = append(parts, fmt.Sprintf("%s %s", k, clip(raw)))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// clip shortens a raw JSON value for an error message.
func clip(raw json.RawMessage) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
