package hfconfig

import (
	"fmt"
	"sort"
	"strings"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// CheckResult is what CheckCheckpoint found in a checkpoint's tensor table.
type CheckResult struct {
	Layout Layout
	// Tensors and Bytes count every tensor of the checkpoint (skipped ones included).
	Tensors int
	Bytes   int64
	// Used and UsedBytes count the tensors the model reads (ExpectedTensors).
	Used      int
	UsedBytes int64
	// DTypes are the element types of the tensors the model reads, most bytes first.
	DTypes []DTypeUse
	// Quant holds the quantized modules of an MLX conversion by weight tensor name (empty
	// otherwise): their codes, scales and biases and the bit width and group size.
	Quant map[string]QuantTensor
	// ResidentBytes is the weight memory the loaded model holds: Linear and Embedding weights
	// as stored (16-bit, float32, or packed codes with their scales and biases), the other
	// weights (norms, convolutions, gate vectors) widened to float32. Copies made at load
	// (LoadOptions.WidenBudget) come on top.
	ResidentBytes int64
	// PLEBuffersChecked is how many PLE layers stored the three hash buffers that were checked
	// (0 when the checkpoint carries none: the derived values are then used unchecked).
	PLEBuffersChecked int
	// Skipped are the tensor groups present in the checkpoint that the model does not load.
	Skipped []SkippedGroup
}

// DTypeUse is one element type among a checkpoint's weights.
type DTypeUse struct {
	DType   string // safetensors dtype name: BF16, F16, F32
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

// CheckCheckpoint checks a checkpoint's tensor table against the config. It is the one check
// that loading (strata.LoadModel) and inspecting (strata.Inspect) run; it reads the headers and
// the PLE hash buffers only (a few hundred bytes), so it works on a checkpoint opened with
// safetensors.OpenDirHeaders as on a mapped one. In order:
//   - DetectLayout and DetectMLX: the names' layout and whether the file is an MLX conversion
//     (every signal must agree);
//   - the quantized modules (resolveQuant): codes, scales and biases with shapes giving a bit
//     width and group size that config.json declares for the module, on Linear weights only;
//   - CheckTensors: every tensor the config implies, with its (logical) shape, nothing else
//     besides the skipped groups (mtp.*, model.visual.*);
//   - the other weights' dtypes are BF16, F16 or F32 (an FP8 or packed-integer tensor is named);
//   - with language_model_only, no model.visual.* tensors;
//   - the PLE buffers, where present, are I64 and equal, element by element, the multipliers,
//     head vocabulary sizes (the primes >= ngram_vocab_size_base) and offsets (their running
//     sums) that strata's PLE hash (op.NewPLEHash) derives from the config.
//
// Errors wrap ErrTensors (ErrUnsupported when the config's PLE hash cannot be built) and name
// the tensor; a PLE mismatch names the tensor, the element index and both values.
func (c *Config) CheckCheckpoint(ck *safetensors.Checkpoint) (*CheckResult, error) {
	names := ck.Names()
	l, err := c.DetectLayout(names)
	if err != nil {
		return nil, err
	}
	tensors := make(map[string]*safetensors.Tensor, len(names))
	shapes := make(map[string][]int64, len(names))
	res := &CheckResult{Layout: l, Tensors: len(names)}
	for _, n := range names {
		t, err := ck.Tensor(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTensors, err)
		}
		tensors[n], shapes[n] = t, t.Shape
		res.Bytes += t.ByteSize()
	}
	if err := c.DetectMLX(&l, ck.Files(), shapes); err != nil {
		return nil, err
	}
	res.Layout = l
	specs := c.ExpectedTensors(l)
	quant, logical, err := c.resolveQuant(specs, tensors, shapes)
	if err != nil {
		return nil, err
	}
	res.Quant = quant
	if err := c.CheckTensors(l, logical); err != nil {
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
	for _, s := range specs {
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
			ErrTensors, len(badDType), cut(badDType))
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

	mtp := SkippedGroup{Group: "mtp.*", Reason: "multi-token-prediction head: used in decoding, not by prefill"}
	if c.MTPLayers > 0 {
		mtp.Reason = fmt.Sprintf("multi-token-prediction head (mtp_num_hidden_layers %d): used in decoding, not by prefill", c.MTPLayers)
	}
	visual := SkippedGroup{Group: "model.visual.*", Reason: "vision tower: strata prefills text"}
	for _, n := range names {
		g := &mtp
		switch {
		case strings.HasPrefix(n, "mtp."):
		case strings.HasPrefix(n, "model.visual."):
			g = &visual
		default:
			continue
		}
		g.Tensors++
		g.Bytes += tensors[n].ByteSize()
	}
	if c.LanguageModelOnly && visual.Tensors > 0 {
		return nil, fmt.Errorf("%w: language_model_only is true, but the checkpoint holds %d model.visual.* tensors (a vision tower)", ErrTensors, visual.Tensors)
	}

	ple := SkippedGroup{Group: "ple.ple_embedding.{layer_multipliers,ngram_heads_offsets,ngram_heads_vocab_sizes}",
		Reason: "PLE hash constants: checked equal to what config.json implies (strata derives them)"}
	for i := 0; i < c.Layers; i++ {
		buffers := c.pleBuffers(l, i)
		if len(buffers) == 0 || tensors[buffers[0].Name] == nil {
			continue // no PLE layer, or no buffers stored (CheckTensors enforced all or none)
		}
		want, err := c.pleConstants(c.PLEIndex(i))
		if err != nil {
			return nil, err
		}
		for k, s := range buffers {
			t := tensors[s.Name]
			if err := checkInts(t, want[k]); err != nil {
				return nil, err
			}
			ple.Tensors++
			ple.Bytes += t.ByteSize()
		}
		res.PLEBuffersChecked++
	}
	for _, g := range []SkippedGroup{mtp, visual, ple} {
		if g.Tensors > 0 {
			res.Skipped = append(res.Skipped, g)
		}
	}
	return res, nil
}

// constant is what one PLE buffer must hold and how to explain an element of it.
type constant struct {
	values []int64
	why    func(i int) string
}

// pleConstants returns, in PLEBuffers order (multipliers, offsets, vocabulary sizes), the
// values strata's PLE hash uses for the PLE layer with index pleIndex.
func (c *Config) pleConstants(pleIndex int) ([3]constant, error) {
	eos := int32(-1)
	if len(c.EOS) > 0 {
		eos = int32(c.EOS[0])
	}
	h, err := op.NewPLEHash(c.Vocab, c.NGramSize, c.HeadsPerNGram, c.NGramVocabBase, c.NGramVocabDivisor, pleIndex, c.Seed, eos)
	if err != nil {
		return [3]constant{}, fmt.Errorf("%w: PLE layer %d: %v", ErrUnsupported, pleIndex, err)
	}
	base := pleIndex * c.NGramHeads()
	return [3]constant{
		{h.Mult, func(i int) string {
			return fmt.Sprintf("splitmix64 multiplier %d of seed %d + 10007 * PLE layer %d", i, c.Seed, pleIndex)
		}},
		{h.Offset, func(i int) string {
			if i == 0 {
				return "head 0 starts the table"
			}
			return fmt.Sprintf("the sum of the vocabulary sizes of heads 0..%d", i-1)
		}},
		{h.HeadVocab, func(i int) string {
			return fmt.Sprintf("prime number %d >= ngram_vocab_size_base %d", base+i+1, c.NGramVocabBase)
		}},
	}, nil
}

// checkInts reads an I64 tensor and compares it with want, naming the first differing elements.
func checkInts(t *safetensors.Tensor, want constant) error {
	if t.DType != safetensors.I64 {
		return fmt.Errorf("%w: tensor %s is %s, want I64", ErrTensors, t.Name, t.DType)
	}
	got, err := t.Int64s()
	if err != nil {
		return fmt.Errorf("%w: reading %s: %w", ErrTensors, t.Name, err)
	}
	var diffs []string
	n := 0
	for i, v := range got {
		if v != want.values[i] {
			n++
			if len(diffs) < 3 {
				diffs = append(diffs, fmt.Sprintf("%s[%d] = %d, config.json implies %d (%s)", t.Name, i, v, want.values[i], want.why(i)))
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("%w: %d of %d elements of %s differ from the config: %s", ErrTensors, n, len(got), t.Name, strings.Join(diffs, "; "))
	}
	return nil
}
