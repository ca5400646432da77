package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/stratakernels/strata/op"
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

// mlxModes describes MLX's quantization modes other than affine (docs/FORMATS.md section 4), which
// strata refuses by name.
var mlxModes = map[string]string{
	"mxfp4": "FP4 E2M1 codes in groups of 32 with E8M0 scales",
	"nvfp4": "FP4 E2M1 codes in groups of 16 with FP8 E4M3 scales",
	"mxfp8": "FP8 E4M3 codes in groups of 32 with E8M0 scales",
}

// MLXQuant is the quantization block of an MLX checkpoint's config.json (mlx_lm.convert writes
// it twice, as quantization and quantization_config): the default bit width and group size of
// mode affine, and per-module entries keyed by module path ("model.layers.7.mlp.gate",
// "lm_head"; mixed recipes give every quantized module one). docs/FORMATS.md section 2.
type MLXQuant struct {
	Bits, Group int // the defaults: bits, group_size
	// Modules are the per-module entries: a dict {group_size, bits[, mode]} (a null size takes
	// mode affine's default, 64 and 4, as MLX's to_quantized does), or false (the module is not
	// quantized). true means the defaults.
	Modules map[string]ModuleQuant
}

// ModuleQuant is one per-module entry of an MLXQuant.
type ModuleQuant struct {
	Quantized   bool // false: the entry is false
	Bits, Group int
}

// For returns the quantization config.json declares for the module at path: its own entry, or
// the defaults (own is false then).
func (q *MLXQuant) For(path string) (m ModuleQuant, own bool) {
	if e, ok := q.Modules[path]; ok {
		return e, true
	}
	return ModuleQuant{Quantized: true, Bits: q.Bits, Group: q.Group}, false
}

// Describe summarises the block: "affine, 4 bits, group size 64" plus the number of per-module
// entries.
func (q *MLXQuant) Describe() string {
	s := fmt.Sprintf("affine, %d bits, group size %d", q.Bits, q.Group)
	if len(q.Modules) > 0 {
		s += fmt.Sprintf(", %d per-module entries", len(q.Modules))
	}
	return s
}

// checkQuantization reads the quantization keys of o (the top level, or text_config) before any
// other field, so that a quantized checkpoint strata does not run is refused by name rather than
// by a list of fields:
//   - quantization_config with quant_method X: ErrUnsupported "quantization method X is not
//     supported", with what is known about X (algorithm, bits, block size);
//   - a quantization block, or a quantization_config without quant_method (mlx_lm.convert writes
//     both keys, equal): an MLX quantized checkpoint, parsed by parseMLXQuant.
//
// Both keys are marked read. It returns nil, nil when neither key is present (or both are null).
func CheckQuantization(o *Object) (*MLXQuant, error) {
	qc, hasQC := o.Get("quantization_config")
	mlx, hasMLX := o.Get("quantization")
	if !hasQC && !hasMLX {
		return nil, nil
	}
	if hasQC {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(qc, &m); err != nil || m == nil {
			return nil, fmt.Errorf("%w: %s: want an object, got %s", ErrConfig, o.Name("quantization_config"), clip(qc))
		}
		if raw, ok := m["quant_method"]; ok {
			var method string
			if err := json.Unmarshal(raw, &method); err != nil {
				return nil, fmt.Errorf("%w: %s.quant_method: want a string, got %s", ErrConfig, o.Name("quantization_config"), clip(raw))
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
			return nil, fmt.Errorf("%w: %s: quantization method %q is not supported (strata runs bf16, f16 or f32 checkpoints and MLX affine conversions)%s", ErrUnsupported, o.Name("quantization_config"), method, detail)
		}
		if !hasMLX {
			mlx, hasMLX = qc, true
		} else if !sameJSON(qc, mlx) {
			return nil, fmt.Errorf("%w: %s and %s differ (mlx_lm.convert writes the same block twice)", ErrConfig, o.Name("quantization"), o.Name("quantization_config"))
		}
	}
	return parseMLXQuant(o.Name("quantization"), mlx)
}

// sameJSON reports whether two JSON values are equal as values (key order and spacing aside).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// parseMLXQuant parses an MLX quantization block: group_size, bits and mode (absent in older
// files: affine) for every quantized module, and per-module entries under keys holding a dot
// (module paths). Modes other than affine are refused by name (ErrUnsupported); bit widths
// outside 2, 3, 4, 5, 6, 8 and group sizes outside 32, 64, 128 are ErrUnsupported too; a
// malformed block is ErrConfig naming the key. Whether each entry names a module of the model
// is checked against the tensor table (CheckCheckpoint).
func parseMLXQuant(where string, block json.RawMessage) (*MLXQuant, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(block, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: %s: want an object, got %s", ErrConfig, where, clip(block))
	}
	q := &MLXQuant{Modules: map[string]ModuleQuant{}}
	def, err := parseModuleQuant(where, m, true)
	if err != nil {
		return nil, err
	}
	q.Bits, q.Group = def.Bits, def.Group
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "group_size", "bits", "mode":
			continue
		}
		raw := bytes.TrimSpace(m[k])
		name := where + "." + k
		if !strings.Contains(k, ".") && k != "lm_head" {
			return nil, fmt.Errorf("%w: %s: unknown field (an MLX quantization block holds group_size, bits, mode and per-module entries keyed by module path)", ErrConfig, name)
		}
		switch string(raw) {
		case "false":
			q.Modules[k] = ModuleQuant{}
			continue
		case "true":
			q.Modules[k] = ModuleQuant{Quantized: true, Bits: q.Bits, Group: q.Group}
			continue
		}
		var e map[string]json.RawMessage
		if err := json.Unmarshal(raw, &e); err != nil || e == nil {
			return nil, fmt.Errorf("%w: %s: want {group_size, bits} or false, got %s", ErrConfig, name, clip(raw))
		}
		mq, err := parseModuleQuant(name, e, false)
		if err != nil {
			return nil, err
		}
		q.Modules[k] = mq
	}
	return q, nil
}

// parseModuleQuant reads group_size, bits and mode of a block or entry (null or absent sizes take
// mode affine's defaults, 64 and 4). In an entry (top false) any other key is ErrConfig.
func parseModuleQuant(where string, m map[string]json.RawMessage, top bool) (ModuleQuant, error) {
	mode := "affine"
	if raw, ok := m["mode"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &mode); err != nil {
			return ModuleQuant{}, fmt.Errorf("%w: %s.mode: want a string, got %s", ErrConfig, where, clip(raw))
		}
	}
	size := func(key string, def int) (int, error) {
		raw, ok := m[key]
		if !ok || string(bytes.TrimSpace(raw)) == "null" {
			return def, nil
		}
		n, err := parseInt(raw)
		if err != nil {
			return 0, fmt.Errorf("%w: %s.%s: %v", ErrConfig, where, key, err)
		}
		return n, nil
	}
	bits, err := size("bits", 4)
	if err != nil {
		return ModuleQuant{}, err
	}
	group, err := size("group_size", 64)
	if err != nil {
		return ModuleQuant{}, err
	}
	if !top {
		for k := range m {
			if k != "group_size" && k != "bits" && k != "mode" {
				return ModuleQuant{}, fmt.Errorf("%w: %s.%s: unknown field of a per-module entry (want group_size, bits, mode)", ErrConfig, where, k)
			}
		}
	}
	if mode != "affine" {
		what := mlxModes[mode]
		if what == "" {
			what = "an unknown mode"
		}
		return ModuleQuant{}, fmt.Errorf("%w: %s: MLX quantization mode %q (%s, %d bits, group size %d) is not supported: strata reads mode affine", ErrUnsupported, where, mode, what, bits, group)
	}
	if !slices.Contains(op.QuantBits, bits) || !slices.Contains(op.QuantGroups, group) {
		return ModuleQuant{}, fmt.Errorf("%w: %s: MLX affine quantization with %d bits in groups of %d (MLX's affine mode has bits %v and groups %v)", ErrUnsupported, where, bits, group, op.QuantBits, op.QuantGroups)
	}
	return ModuleQuant{Quantized: true, Bits: bits, Group: group}, nil
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
