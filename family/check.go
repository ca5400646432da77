package family

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// CheckResult is what CheckCheckpoint found in a checkpoint's tensor table.
type CheckResult struct {
	Plan *Plan
	// Tensors and Bytes count every tensor of the checkpoint (skipped ones included).
	Tensors int
	Bytes   int64
	// Used and UsedBytes count the tensors the model reads (Plan.Tensors, with the scales and
	// biases of quantized modules).
	Used      int
	UsedBytes int64
	// DTypes are the element types of the tensors the model reads, most bytes first.
	DTypes []DTypeUse
	// Quant holds the quantized modules of an MLX conversion by weight tensor name (empty
	// otherwise): their codes, scales and biases and the bit width and group size.
	Quant map[string]QuantTensor
	// ResidentBytes is the weight memory the loaded model holds: Linear and Embedding weights
	// as stored (16-bit, float32, or packed codes with their scales and biases), the other
	// weights (norms, convolutions, gate vectors) widened to float32.
	ResidentBytes int64
	// ConstantsChecked is how many constant groups (Plan.Constants, e.g. one PLE layer's hash
	// buffers) the checkpoint stores, each checked equal to what config.json implies.
	ConstantsChecked int
	// Skipped are the tensor groups present in the checkpoint that the model does not load.
	Skipped []SkippedGroup
}

// DTypeUse is one element type among a checkpoint's weights.
type DTypeUse struct {
	DType   string // safetensors dtype name: BF16, F16, F32, U32
	Tensors int
	Bytes   int64
}

// SkippedGroup is a group of tensors a checkpoint carries and the model does not load.
type SkippedGroup struct {
	Group   string // name pattern, e.g. "mtp.*"
	Tensors int
	Bytes   int64
	Reason  string
}

// QuantTensor is one quantized module of an MLX checkpoint: the names of its U32 codes, scales
// and biases, and the bit width and group size its shapes give (checked against config.json).
type QuantTensor struct {
	Weight, Scales, Biases string
	Bits, Group            int
	ScaleDType             safetensors.DType // BF16 or F16, the dtype of scales and biases
}

// weightDTypes are the element types strata reads weights in (widened to float32 or kept
// 16-bit in memory).
var weightDTypes = map[safetensors.DType]bool{safetensors.BF16: true, safetensors.F16: true, safetensors.F32: true}

// CheckCheckpoint checks a checkpoint's tensor table against the config and returns the plan
// for it. It is the one check that loading (strata.LoadModel) and inspecting (strata.Inspect)
// run; it reads the headers and the constant tensors only (a few hundred bytes), so it works on
// a checkpoint opened with safetensors.OpenDirHeaders as on a mapped one. In order:
//   - DetectLayout: the text prefix, the expert storage, whether it is an MLX conversion (every
//     signal must agree);
//   - the family's Plan for that layout;
//   - the quantized modules: codes, scales and biases with shapes giving a bit width and group
//     size that config.json declares for the module, on Linear weights only;
//   - every tensor of the plan present with its (logical) shape, nothing else besides the
//     plan's constants and skipped groups;
//   - the other weights' dtypes are BF16, F16 or F32 (an FP8 or packed-integer tensor is named);
//   - with language_model_only, no vision tensors;
//   - each constant group absent, or present whole, I64 and equal element by element to what
//     strata derives from the config.
//
// Errors wrap hfconfig.ErrTensors (ErrUnsupported for a layout the family refuses) and name the
// tensor; a constant mismatch names the tensor, the element index and both values.
func CheckCheckpoint(c *hfconfig.Config, ck *safetensors.Checkpoint) (*CheckResult, error) {
	names := ck.Names()
	tensors := make(map[string]*safetensors.Tensor, len(names))
	shapes := make(map[string][]int64, len(names))
	res := &CheckResult{Tensors: len(names)}
	for _, n := range names {
		t, err := ck.Tensor(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", hfconfig.ErrTensors, err)
		}
		tensors[n], shapes[n] = t, t.Shape
		res.Bytes += t.ByteSize()
	}
	l, err := DetectLayout(c, names, shapes, ck.Files())
	if err != nil {
		return nil, err
	}
	plan, err := Of(c).Plan(c, l)
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	quant, logical, err := resolveQuant(c, plan.Tensors, tensors, shapes)
	if err != nil {
		return nil, err
	}
	res.Quant = quant
	if err := checkTensors(plan, logical); err != nil {
		return nil, err
	}

	uses := map[safetensors.DType]*DTypeUse{}
	use := func(t *safetensors.Tensor) {
		u := uses[t.DType]
		if u == nil {
			u = &DTypeUse{DType: string(t.DType)}
			uses[t.DType] = u
		}
		u.Tensors++
		u.Bytes += t.ByteSize()
		res.Used++
		res.UsedBytes += t.ByteSize()
	}
	var badDType []string
	for _, s := range plan.Tensors {
		t := tensors[s.Name]
		if q, ok := quant[s.Name]; ok {
			for _, n := range []string{q.Weight, q.Scales, q.Biases} {
				use(tensors[n])
				res.ResidentBytes += tensors[n].ByteSize()
			}
			continue
		}
		if !weightDTypes[t.DType] {
			badDType = append(badDType, fmt.Sprintf("%s %s", s.Name, t.DType))
			continue
		}
		use(t)
		if s.Linear {
			res.ResidentBytes += t.ByteSize()
		} else {
			res.ResidentBytes += 4 * t.NumElements()
		}
	}
	if len(badDType) > 0 {
		return nil, fmt.Errorf("%w: %d tensors are not BF16, F16 or F32, the weight types strata reads (quantized codes without their <module>.scales?): %s",
			hfconfig.ErrTensors, len(badDType), cut(badDType))
	}
	for _, u := range uses {
		res.DTypes = append(res.DTypes, *u)
	}
	sort.Slice(res.DTypes, func(i, j int) bool {
		if res.DTypes[i].Bytes != res.DTypes[j].Bytes {
			return res.DTypes[i].Bytes > res.DTypes[j].Bytes
		}
		return res.DTypes[i].DType < res.DTypes[j].DType
	})

	skipped := make([]SkippedGroup, len(plan.Skipped))
	vision, visionGroups := 0, []string{}
	for i, s := range plan.Skipped {
		skipped[i] = SkippedGroup{Group: s.Prefix + "*", Reason: s.Reason}
	}
	for _, n := range names {
		for i, s := range plan.Skipped {
			if strings.HasPrefix(n, s.Prefix) {
				skipped[i].Tensors++
				skipped[i].Bytes += tensors[n].ByteSize()
				if s.Vision {
					if vision++; len(visionGroups) == 0 || visionGroups[len(visionGroups)-1] != s.Prefix+"*" {
						visionGroups = append(visionGroups, s.Prefix+"*")
					}
				}
				break
			}
		}
	}
	if c.LanguageModelOnly && vision > 0 {
		return nil, fmt.Errorf("%w: language_model_only is true, but the checkpoint holds %d %s tensors (a vision tower)", hfconfig.ErrTensors, vision, strings.Join(visionGroups, " and "))
	}
	for _, g := range plan.Constants {
		present := tensors[g.Tensors[0].Name] != nil // checkTensors enforced all or none
		if !present {
			continue
		}
		sg := SkippedGroup{Group: g.Group, Reason: g.Reason}
		for _, k := range g.Tensors {
			t := tensors[k.Name]
			if err := checkInts(t, k); err != nil {
				return nil, err
			}
			sg.Tensors++
			sg.Bytes += t.ByteSize()
		}
		res.ConstantsChecked++
		if n := len(skipped); n > 0 && skipped[n-1].Group == sg.Group {
			skipped[n-1].Tensors += sg.Tensors
			skipped[n-1].Bytes += sg.Bytes
		} else {
			skipped = append(skipped, sg)
		}
	}
	for _, g := range skipped {
		if g.Tensors > 0 {
			res.Skipped = append(res.Skipped, g)
		}
	}
	return res, nil
}

// checkTensors compares a checkpoint's tensor shapes (name -> logical shape) with the plan: every
// tensor of plan.Tensors with its shape; each constant group absent or present whole with its
// shapes; nothing else but the skipped groups. It returns nil or one error wrapping
// hfconfig.ErrTensors listing every missing, unexpected and wrongly shaped tensor (sorted; long
// lists cut after 20 names per kind, with the count).
func checkTensors(plan *Plan, shapes map[string][]int64) error {
	seen := make(map[string]bool, len(plan.Tensors))
	var missing, wrong, extra []string
	check := func(name string, want []int64) {
		if !slices.Equal(shapes[name], want) {
			wrong = append(wrong, fmt.Sprintf("%s %v (want %v)", name, shapes[name], want))
		}
	}
	for _, s := range plan.Tensors {
		seen[s.Name] = true
		if _, ok := shapes[s.Name]; !ok {
			missing = append(missing, s.Name)
			continue
		}
		check(s.Name, s.Shape)
	}
	for _, g := range plan.Constants {
		n := 0
		for _, k := range g.Tensors {
			seen[k.Name] = true
			if _, ok := shapes[k.Name]; ok {
				n++
			}
		}
		for _, k := range g.Tensors {
			if _, ok := shapes[k.Name]; ok {
				check(k.Name, []int64{int64(len(k.Values))})
			} else if n > 0 {
				missing = append(missing, k.Name+" (the other tensors of its group are present)")
			}
		}
	}
	for n := range shapes {
		if !seen[n] && !skippedBy(plan.Skipped, n) {
			extra = append(extra, n)
		}
	}
	if len(missing)+len(wrong)+len(extra) == 0 {
		return nil
	}
	var parts []string
	for _, k := range []struct {
		what  string
		names []string
	}{{"missing", missing}, {"wrong shape", wrong}, {"unexpected", extra}} {
		if len(k.names) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s: %s", len(k.names), k.what, cut(k.names)))
		}
	}
	return fmt.Errorf("%w (%s, %s): %s", hfconfig.ErrTensors, plan.Config.ModelType, plan.Layout.Describe(), strings.Join(parts, "; "))
}

// checkInts reads an I64 tensor and compares it with want, naming the first differing elements.
func checkInts(t *safetensors.Tensor, want Constant) error {
	if t.DType != safetensors.I64 {
		return fmt.Errorf("%w: tensor %s is %s, want I64", hfconfig.ErrTensors, t.Name, t.DType)
	}
	got, err := t.Int64s()
	if err != nil {
		return fmt.Errorf("%w: reading %s: %w", hfconfig.ErrTensors, t.Name, err)
	}
	var diffs []string
	n := 0
	for i, v := range got {
		if v != want.Values[i] {
			n++
			if len(diffs) < 3 {
				diffs = append(diffs, fmt.Sprintf("%s[%d] = %d, config.json implies %d (%s)", t.Name, i, v, want.Values[i], want.Why(i)))
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%w: %d of %d elements of %s differ from the config: %s", hfconfig.ErrTensors, n, len(got), t.Name, strings.Join(diffs, "; "))
	}
	return nil
}

// resolveQuant finds the quantized modules of the tensor table: a Linear spec is quantized
// exactly when <module>.scales exists. For each it checks the codes (U32 [..., out, in*bits/32]),
// the scales and biases (BF16 or F16, one dtype, [..., out, in/group]), derives bits and group
// from those shapes and compares them with what config.json declares for the module (its own
// entry, else the defaults); it also refuses scales on a norm, conv or vector, entries for
// modules the model does not have, and disagreements between an entry and the tensors. It
// returns the quantized modules by weight name and the table with each quantized module
// described by its logical shape (codes unpacked, scales and biases removed), for checkTensors.
// Errors wrap hfconfig.ErrTensors and name the tensors.
func resolveQuant(c *hfconfig.Config, specs []Spec, tensors map[string]*safetensors.Tensor, shapes map[string][]int64) (map[string]QuantTensor, map[string][]int64, error) {
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
			continue // reported missing by checkTensors (the scales and biases as unexpected)
		}
		q, problem := quantModule(c, sp, w, sc, bi)
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
		return nil, nil, fmt.Errorf("%w: %d quantized-module problems: %s", hfconfig.ErrTensors, len(bad), cutList(bad, 8))
	}
	return quant, logical, nil
}

// Module is the module path of a Linear weight: its name without ".weight" (the key of a
// per-module quantization entry).
func (s Spec) Module() string { return strings.TrimSuffix(s.Name, ".weight") }

// quantModule checks one quantized module (weight w with scales sc and biases bi) against its
// logical shape sp.Shape [..., out, in] and the config, returning it or a problem naming the
// tensors.
func quantModule(c *hfconfig.Config, sp Spec, w, sc, bi *safetensors.Tensor) (QuantTensor, string) {
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

// cut joins a sorted copy of names, keeping the first 20 (then " and N more").
func cut(names []string) string {
	s := append([]string(nil), names...)
	sort.Strings(s)
	if len(s) > 20 {
		return strings.Join(s[:20], ", ") + fmt.Sprintf(" and %d more", len(s)-20)
	}
	return strings.Join(s, ", ")
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
