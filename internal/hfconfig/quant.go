package hfconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratakernels/strata/op"
)

// quantMethods describes the quant_method values of the quantized releases users download that
// strata does not read, so that a refusal says what the file is. Any other quant_method but
// "fp8" is refused too, by its name.
var quantMethods = map[string]string{
	"modelopt":           "NVIDIA ModelOpt, NVFP4 or FP8",
	"compressed-tensors": "compressed-tensors packing, NVFP4, INT4 or FP8",
	"auto-round":         "Intel AutoRound",
	"awq":                "AWQ 4-bit",
	"gptq":               "GPTQ",
	"bitsandbytes":       "bitsandbytes",
}

// ModeAffine is MLX's default quantization mode: integer codes with a scale and a bias per group.
const ModeAffine = "affine"

// MLXQuant is the quantization block of an MLX checkpoint's config.json (mlx_lm.convert and
// mlx_vlm.convert write it twice, as quantization and quantization_config): the default mode,
// bit width and group size, and per-module entries keyed by module path
// ("model.layers.7.mlp.gate", "lm_head"; mixed recipes give every quantized module one).
// docs/FORMATS.md section 2; the modes are mlx's (mlx/ops.cpp quantize): affine, and the float modes
// mxfp4, nvfp4 and mxfp8 with their fixed group sizes and bit widths (op.QuantMode).
type MLXQuant struct {
	Mode        string // the default mode: ModeAffine (also when the block has none) or a float mode
	Bits, Group int    // the defaults: bits, group_size
	// Modules are the per-module entries: a dict {group_size, bits[, mode]} (a null size takes the
	// entry's mode's default, as MLX's to_quantized does; an entry without mode is affine whatever
	// the block's mode, as to_quantized defaults to it), or false (the module is not quantized).
	// true means the defaults.
	Modules map[string]ModuleQuant
}

// ModuleQuant is one per-module entry of an MLXQuant, or its defaults.
type ModuleQuant struct {
	Quantized   bool // false: the entry is false
	Mode        string
	Bits, Group int
}

// FloatMode is m's mode as an op.QuantMode, false for affine (or an unquantized entry).
func (m ModuleQuant) FloatMode() (op.QuantMode, bool) {
	for _, q := range op.QuantModes {
		if q.String() == m.Mode {
			return q, true
		}
	}
	return 0, false
}

// Describe is "4-bit affine in groups of 64" or "mxfp4 (4 bits in groups of 32)".
func (m ModuleQuant) Describe() string {
	if m.Mode == ModeAffine {
		return fmt.Sprintf("%d-bit affine in groups of %d", m.Bits, m.Group)
	}
	return fmt.Sprintf("%s (%d bits in groups of %d)", m.Mode, m.Bits, m.Group)
}

// For returns the quantization config.json declares for the module at path: its own entry, or
// the defaults (own is false then).
func (q *MLXQuant) For(path string) (m ModuleQuant, own bool) {
	if e, ok := q.Modules[path]; ok {
		return e, true
	}
	return ModuleQuant{Quantized: true, Mode: q.Mode, Bits: q.Bits, Group: q.Group}, false
}

// Describe summarises the block: "affine, 4 bits, group size 64" plus the number of per-module
// entries.
func (q *MLXQuant) Describe() string {
	s := fmt.Sprintf("%s, %d bits, group size %d", q.Mode, q.Bits, q.Group)
	if len(q.Modules) > 0 {
		s += fmt.Sprintf(", %d per-module entries", len(q.Modules))
	}
	return s
}

// FP8Quant is the quantization_config of a block-scaled FP8 release (quant_method "fp8":
// transformers' FineGrainedFP8Config, the Qwen3-Next-80B-A3B-*-FP8 and Qwen3.8-Flash-Next-FP8
// releases; docs/FORMATS.md section 4): every Linear layer not named by modules_to_not_convert stores
// F8_E4M3 codes with a scale per block of Block[0] output rows by Block[1] inputs
// (<module>.weight_scale_inv), and the modules modules_to_convert names (non-Linear ones: the
// Qwen3.8 n-gram table) are FP8 too. Activations are quantized per token on the fly
// (activation_scheme "dynamic", the only scheme read): weight-only for a float32 prefill.
type FP8Quant struct {
	Block      [2]int   // weight_block_size: [128, 128] (op.FP8BlockSize), the only size read
	NotConvert []string // modules_to_not_convert, as written
	Convert    []string // modules_to_convert, as written

	once         sync.Once
	excl, inclus map[string]bool // the entries of NotConvert and Convert
}

// Excluded returns the modules_to_not_convert entry naming module path m, if any (names).
func (q *FP8Quant) Excluded(m string) (string, bool) {
	q.once.Do(q.index)
	return names(q.excl, m)
}

// Included returns the modules_to_convert entry naming module path m, if any (names).
func (q *FP8Quant) Included(m string) (string, bool) {
	q.once.Do(q.index)
	return names(q.inclus, m)
}

func (q *FP8Quant) index() {
	set := func(l []string) map[string]bool {
		s := make(map[string]bool, len(l))
		for _, e := range l {
			s[e] = true
		}
		return s
	}
	q.excl, q.inclus = set(q.NotConvert), set(q.Convert)
}

// names returns the entry of set that names module path m: m itself, or a run of its dotted parts
// ("lm_head" names lm_head, "ple.ple_embedding.ngram_embedding" names
// model.layers.1.ple.ple_embedding.ngram_embedding.shard_3; "mlp.gate" does not name
// mlp.gate_proj). The longest run wins.
func names(set map[string]bool, m string) (string, bool) {
	if len(set) == 0 {
		return "", false
	}
	var starts []int // byte offsets of the parts
	for i := 0; i < len(m); i++ {
		if i == 0 || m[i-1] == '.' {
			starts = append(starts, i)
		}
	}
	for n := len(starts); n > 0; n-- { // runs of n parts, longest first
		for i := 0; i+n <= len(starts); i++ {
			end := len(m)
			if i+n < len(starts) {
				end = starts[i+n] - 1
			}
			if e := m[starts[i]:end]; set[e] {
				return e, true
			}
		}
	}
	return "", false
}

// Describe is "FP8 E4M3, blocks of 128 x 128, 12 modules not converted, 1 converted".
func (q *FP8Quant) Describe() string {
	s := fmt.Sprintf("FP8 E4M3, blocks of %d x %d, %d modules_to_not_convert entries", q.Block[0], q.Block[1], len(q.NotConvert))
	if len(q.Convert) > 0 {
		s += fmt.Sprintf(", %d modules_to_convert", len(q.Convert))
	}
	return s
}

// CheckQuantization reads the quantization keys of o (the top level, or text_config) before any
// other field, so that a quantized checkpoint strata does not run is refused by name rather than
// by a list of fields:
//   - quantization_config with quant_method "fp8": an FP8 release, parsed by parseFP8;
//   - quantization_config with another quant_method X: ErrUnsupported "quantization method X
//     is not supported", with what is known about X (algorithm, bits, block size);
//   - a quantization block, or a quantization_config without quant_method (mlx_lm.convert writes
//     both keys, equal): an MLX quantized checkpoint, parsed by parseMLXQuant.
//
// Both keys are marked read. It returns nil, nil, nil when neither key is present (or both are
// null).
func CheckQuantization(o *Object) (*MLXQuant, *FP8Quant, error) {
	qc, hasQC := o.Get("quantization_config")
	mlx, hasMLX := o.Get("quantization")
	if !hasQC && !hasMLX {
		return nil, nil, nil
	}
	if hasQC {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(qc, &m); err != nil || m == nil {
			return nil, nil, fmt.Errorf("%w: %s: want an object, got %s", ErrConfig, o.Name("quantization_config"), clip(qc))
		}
		if raw, ok := m["quant_method"]; ok {
			var method string
			if err := json.Unmarshal(raw, &method); err != nil {
				return nil, nil, fmt.Errorf("%w: %s.quant_method: want a string, got %s", ErrConfig, o.Name("quantization_config"), clip(raw))
			}
			if method == "fp8" {
				if hasMLX {
					return nil, nil, fmt.Errorf("%w: %s is an MLX quantization block beside an FP8 quantization_config", ErrConfig, o.Name("quantization"))
				}
				f, err := parseFP8(o.Name("quantization_config"), m)
				return nil, f, err
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
			return nil, nil, fmt.Errorf("%w: %s: quantization method %q is not supported (strata runs bf16, f16 or f32 checkpoints, FP8 block-scaled releases (quant_method \"fp8\") and MLX conversions)%s", ErrUnsupported, o.Name("quantization_config"), method, detail)
		}
		if !hasMLX {
			mlx, hasMLX = qc, true
		} else if !sameJSON(qc, mlx) {
			return nil, nil, fmt.Errorf("%w: %s and %s differ (mlx_lm.convert writes the same block twice)", ErrConfig, o.Name("quantization"), o.Name("quantization_config"))
		}
	}
	q, err := parseMLXQuant(o.Name("quantization"), mlx)
	return q, nil, err
}

// sameJSON reports whether two JSON values are equal as values (key order and spacing aside).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// parseFP8 reads an FP8 quantization_config: weight_block_size [128, 128] (required; another
// size is ErrUnsupported), fmt "e4m3" (the default; "e5m2" and others ErrUnsupported),
// activation_scheme "dynamic" (the default; "static" needs calibrated activation scales strata
// does not read: ErrUnsupported), weight_per_tensor and act_per_tensor false (true:
// ErrUnsupported), modules_to_not_convert and modules_to_convert (lists of module paths, or
// null). Any other key, or a value of the wrong type, is ErrConfig naming it.
func parseFP8(where string, m map[string]json.RawMessage) (*FP8Quant, error) {
	var errs []string
	o := &Object{where: where, m: m, used: map[string]bool{"quant_method": true}, errs: &errs}
	q := &FP8Quant{}
	var unsup []string
	if !o.Has("weight_block_size") {
		o.Fail("weight_block_size", "missing (want [128, 128]: one scale per 128 x 128 block)")
	} else if b := o.Ints("weight_block_size", nil); b != nil {
		if len(b) != 2 {
			o.Fail("weight_block_size", "want [rows, columns], got %v", b)
		} else if q.Block = [2]int{b[0], b[1]}; b[0] != op.FP8BlockSize || b[1] != op.FP8BlockSize {
			unsup = append(unsup, fmt.Sprintf("%s %v (strata reads FP8 blocks of %d x %d)", o.Name("weight_block_size"), b, op.FP8BlockSize, op.FP8BlockSize))
		}
	}
	if f := o.Str("fmt", "e4m3"); f != "e4m3" {
		unsup = append(unsup, fmt.Sprintf("%s %q (strata reads E4M3 codes)", o.Name("fmt"), f))
	}
	if s := o.Str("activation_scheme", "dynamic"); s != "dynamic" {
		unsup = append(unsup, fmt.Sprintf("%s %q (strata runs weight-only FP8: activation_scheme dynamic)", o.Name("activation_scheme"), s))
	}
	for _, k := range []string{"weight_per_tensor", "act_per_tensor"} {
		if o.Bool(k, false) {
			unsup = append(unsup, o.Name(k)+" true (strata reads FP8 weights with block scales)")
		}
	}
	q.NotConvert, _ = o.Strs("modules_to_not_convert")
	q.Convert, _ = o.Strs("modules_to_convert")
	o.Unknown()
	if err := o.Errors(); err != nil {
		return nil, err
	}
	if len(unsup) > 0 {
		return nil, fmt.Errorf("%w: FP8 quantization_config: %s", ErrUnsupported, strings.Join(unsup, "; "))
	}
	return q, nil
}

// parseMLXQuant parses an MLX quantization block: group_size, bits and mode (absent in older
// files: affine) for every quantized module, and per-module entries under keys holding a dot
// (module paths). Modes other than affine, mxfp4, nvfp4 and mxfp8 are refused by name
// (ErrUnsupported); so are bit widths outside 2, 3, 4, 5, 6, 8 and group sizes outside 32, 64,
// 128 for affine, and for a float mode any group size and bit width but its own; a malformed
// block is ErrConfig naming the key. Whether each entry names a module of the model is checked
// against the tensor table (CheckCheckpoint).
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
	q.Mode, q.Bits, q.Group = def.Mode, def.Bits, def.Group
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
			q.Modules[k] = ModuleQuant{Quantized: true, Mode: q.Mode, Bits: q.Bits, Group: q.Group}
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

// modeDefaults are mlx's default (group size, bits) of each mode (mlx/ops.cpp and
// python/mlx/nn/layers/quantized.py _defaults_for_mode); the float modes accept no others.
var modeDefaults = map[string][2]int{ModeAffine: {64, 4}, "mxfp4": {32, 4}, "nvfp4": {16, 4}, "mxfp8": {32, 8}}

// modeNames describes the float modes for messages.
var modeNames = map[string]string{
	"mxfp4": "FP4 E2M1 codes in groups of 32 with E8M0 scales",
	"nvfp4": "FP4 E2M1 codes in groups of 16 with FP8 E4M3 scales",
	"mxfp8": "FP8 E4M3 codes in groups of 32 with E8M0 scales",
}

// parseModuleQuant reads group_size, bits and mode of a block or entry (null or absent sizes take
// the mode's defaults). In an entry (top false) any other key is ErrConfig.
func parseModuleQuant(where string, m map[string]json.RawMessage, top bool) (ModuleQuant, error) {
	mode := ModeAffine
	if raw, ok := m["mode"]; ok && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &mode); err != nil {
			return ModuleQuant{}, fmt.Errorf("%w: %s.mode: want a string, got %s", ErrConfig, where, clip(raw))
		}
	}
	def, known := modeDefaults[mode]
	if !known {
		return ModuleQuant{}, fmt.Errorf("%w: %s: MLX quantization mode %q is not supported: strata reads the modes affine, mxfp4, nvfp4 and mxfp8", ErrUnsupported, where, mode)
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
	bits, err := size("bits", def[1])
	if err != nil {
		return ModuleQuant{}, err
	}
	group, err := size("group_size", def[0])
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
	if mode != ModeAffine {
		if bits != def[1] || group != def[0] {
			return ModuleQuant{}, fmt.Errorf("%w: %s: MLX quantization mode %q (%s) with %d bits in groups of %d: mlx fixes the mode at %d bits in groups of %d",
				ErrUnsupported, where, mode, modeNames[mode], bits, group, def[1], def[0])
		}
	} else if !slices.Contains(op.QuantBits, bits) || !slices.Contains(op.QuantGroups, group) {
		return ModuleQuant{}, fmt.Errorf("%w: %s: MLX affine quantization with %d bits in groups of %d (MLX's affine mode has bits %v and groups %v)", ErrUnsupported, where, bits, group, op.QuantBits, op.QuantGroups)
	}
	return ModuleQuant{Quantized: true, Mode: mode, Bits: bits, Group: group}, nil
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

// ReadQuantization reads the quantization keys of o (CheckQuantization) into c.Quant or c.FP8:
// family.Parse calls it on the top level, a family whose text model sits under text_config on that
// object too. A second block (at both levels) is ErrConfig.
func ReadQuantization(c *Config, o *Object) error {
	q, f, err := CheckQuantization(o)
	if err != nil || q == nil && f == nil {
		return err
	}
	if c.Quant != nil || c.FP8 != nil {
		return fmt.Errorf("%w: %s: a quantization block beside the one already read (at the top level)", ErrConfig, o.Name("quantization_config"))
	}
	c.Quant, c.FP8 = q, f
	return nil
}
