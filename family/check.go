package family

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/stratakernels/strata/internal/hfconfig"
	"github.com/stratakernels/strata/internal/safetensors"
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
	// Quant holds the quantized modules (MLX affine and float modes, FP8) by weight tensor name
	// (empty for a float checkpoint): their format, codes, scales and biases, bit width and
	// group size.
	Quant map[string]QuantTensor
	// ResidentBytes is the weight memory the loaded model holds: Linear and Embedding weights
	// as stored (16-bit, float32, or packed codes with their scales and biases; an FP8 table's
	// one scale repeated per block), the other weights (norms, convolutions, gate vectors)
	// widened to float32.
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

// weightDTypes are the element types strata reads weights in (widened to float32 or kept
// 16-bit in memory).
var weightDTypes = map[safetensors.DType]bool{safetensors.BF16: true, safetensors.F16: true, safetensors.F32: true}

// CheckCheckpoint checks a checkpoint's tensor table against the config and returns the plan
// for it. It is the one check that loading (strata.LoadModel) and inspecting (strata.Inspect)
// run; it reads the headers, the constant tensors and the few norm gains a family's DetectMore
// weighs (a few hundred bytes to a few megabytes), so it works on a checkpoint opened with
// safetensors.OpenDirHeaders as on a mapped one. In order:
//   - DetectLayout: the text prefix, the expert storage, whether it is an MLX conversion (every
//     signal must agree), the family's own decisions (how the zero-centred gains are stored);
//   - the family's Plan for that layout;
//   - the quantized modules (resolveQuant): MLX affine and float-mode codes with scales (and
//     biases) whose shapes give the bit width, group size and mode config.json declares, FP8
//     codes with their scale grid or tensor scale as the FP8 quantization_config and its
//     modules_to_not_convert / modules_to_convert say, on Linear and Embedding weights only;
//   - every tensor of the plan present with its (logical) shape, nothing else besides the
//     plan's constants and skipped groups;
//   - FP8 rows the plan regroups in whole 128-row blocks (checkRegroup);
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
	values := func(name string) ([]float32, error) {
		t := tensors[name]
		if t == nil {
			return nil, fmt.Errorf("%w: no tensor %s", hfconfig.ErrTensors, name)
		}
		return t.ReadFloat32()
	}
	l, err := DetectLayout(c, Table{Names: names, Shapes: shapes, Files: ck.Files(), Values: values})
	if err != nil {
		return nil, err
	}
	plan, err := Of(c).Plan(c, l)
	if err != nil {
		return nil, err
	}
	res.Plan = plan
	quant, logical, err := resolveQuant(c, plan, tensors, shapes)
	if err != nil {
		return nil, err
	}
	res.Quant = quant
	if err := checkTensors(plan, logical); err != nil {
		return nil, err
	}
	if err := checkRegroup(plan, quant); err != nil {
		return nil, err
	}

	uses := map[safetensors.DType]*DTypeUse{}
	used := map[string]bool{}
	use := func(t *safetensors.Tensor) {
		if used[t.Name] {
			return // a scale shared by several tables (FP8Tensor)
		}
		used[t.Name] = true
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
			for _, n := range q.Tensors() {
				use(tensors[n])
			}
			res.ResidentBytes += q.residentBytes(s.Shape, tensors)
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
		return nil, fmt.Errorf("%w: %d tensors are not BF16, F16 or F32, the float weight types strata reads (quantized codes without their <module>.scales? FP8 codes where the plan reads a vector?): %s",
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
