package modelgen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// Dequantize writes the Hugging Face checkpoint whose weights are exactly the values a
// quantized or converted checkpoint in src holds (an MLX conversion, affine or in a float mode,
// or an FP8 release), all in float32 (bf16 cannot hold dequantized values), in the family's first
// layout with the experts stored as experts says and the tables split as in src: every quantized
// module dequantized (dequantize: each element evaluated in float64 from its code and scale, read
// bit by bit, and rounded once to float32), conv1d weights back to [C, 1, K], the gains stored as
// 1 + w read as stored - 1 (exact in float32), everything else widened exactly. config.json loses
// its quantization blocks and gets dtype float32. Transformers run on it computes from the
// weights strata reads from src, which is what the goldens of converted checkpoints need, and
// strata's own logits on it are the invariant the conversions are tested against.
func Dequantize(src, dst string, experts family.ExpertStorage) error {
	raw, err := readConfig(src)
	if err != nil {
		return err
	}
	res, ck, err := openPlan(src)
	if err != nil {
		return err
	}
	defer ck.Close()
	cfg := res.Plan.Config
	f := family.Of(cfg)
	dp, err := f.Plan(cfg, family.Layout{Prefix: f.Prefixes()[0], Experts: experts, NGramParts: res.Plan.Layout.NGramParts})
	if err != nil {
		return err
	}
	w, err := mapPlan(context.Background(), ck, res, dp, true)
	if err != nil {
		return err
	}
	var out []safetensors.WriteTensor
	for _, t := range dp.Tensors {
		out = append(out, safetensors.WriteTensor{Name: t.Name, DType: safetensors.F32, Shape: t.Shape, Data: w[t.Name].bytes()})
	}
	for _, c := range []map[string]any{raw, nested(raw)} {
		if c != nil {
			delete(c, "quantization")
			delete(c, "quantization_config")
			c["dtype"] = "float32"
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dst, safetensors.SingleFile), out, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cj, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "config.json"), cj, 0o644)
}

// nested is the text_config of a multimodal config.json, nil for a flat one.
func nested(cfg map[string]any) map[string]any {
	tc, _ := cfg["text_config"].(map[string]any)
	return tc
}

// dequantDType is the float dtype a dequantized module takes in a conversion that keeps dtypes:
// its scales' (BF16, F16 or F32), BF16 for U8 scales (mlx's default output of its float modes).
func dequantDType(q family.QuantTensor) safetensors.DType {
	if q.ScaleDType == safetensors.U8 {
		return safetensors.BF16
	}
	return q.ScaleDType
}

// dequantize returns the values of the quantized module q of logical shape [..., n, k] as
// float32, each evaluated in float64 and rounded once: MLX affine scale * code + bias per group
// (codes read bit by bit), MLX float modes decode(code) * decode(scale) (E2M1 or E4M3 codes, E8M0
// or E4M3 scales), FP8 e4m3(code) * scale of its 128 x 128 block or of the tensor.
func dequantize(ck *safetensors.Checkpoint, q family.QuantTensor, shape []int64) ([]float32, error) {
	w, err := ck.Tensor(q.Weight)
	if err != nil {
		return nil, err
	}
	sc, err := ck.Tensor(q.Scales)
	if err != nil {
		return nil, err
	}
	switch q.Format {
	case family.MLXAffine:
		bi, err := ck.Tensor(q.Biases)
		if err != nil {
			return nil, err
		}
		return dequantMLX(w, sc, bi, q.Bits, q.Group)
	case family.MLXFloat:
		return dequantFloatMode(w, sc, q.Mode)
	}
	s, err := sc.Float32()
	if err != nil {
		return nil, err
	}
	n, k := int(shape[0]), int(shape[1])
	g := op.FP8Grid(n, k)
	out := make([]float32, n*k)
	for r := 0; r < n; r++ {
		for c := 0; c < k; c++ {
			scale := s[0]
			if q.Format == family.FP8Blocks {
				scale = s[r/op.FP8BlockSize*g[1]+c/op.FP8BlockSize]
			}
			out[r*k+c] = float32(decodeE4M3(w.Data[r*k+c]) * float64(scale))
		}
	}
	return out, nil
}

// dequantFloatMode decodes an MLX float-mode weight: codes w U32 [..., out, in*bits/32], scales
// s U8 [..., out, in/group]; element i of a row is decode(code i) * decode(scale i/group).
func dequantFloatMode(w, s *safetensors.Tensor, m op.QuantMode) ([]float32, error) {
	bits, group := m.Bits(), m.Group()
	words := int(w.Shape[len(w.Shape)-1])
	in := words * 32 / bits
	rows := int(w.NumElements()) / words
	if int(s.NumElements()) != rows*in/group {
		return nil, fmt.Errorf("modelgen: %s: %d scales for %d rows of %d in groups of %d", w.Name, s.NumElements(), rows, in, group)
	}
	out := make([]float32, rows*in)
	for r := 0; r < rows; r++ {
		for i := 0; i < in; i++ {
			word := binary.LittleEndian.Uint32(w.Data[4*(r*words+i*bits/32):])
			c := uint8(word >> (i * bits % 32) & (1<<bits - 1))
			code := float64(e2m1Values[c&15])
			if bits == 8 {
				code = decodeE4M3(c)
			}
			sb := s.Data[r*in/group+i/group]
			scale := math.Ldexp(1, int(sb)-127) // E8M0
			if m == op.NVFP4 {
				scale = decodeE4M3(sb)
			}
			out[r*in+i] = float32(code * scale)
		}
	}
	return out, nil
}

// dequantMLX dequantizes the U32 codes w [..., out, words] of bits-bit values with scales and
// biases s, b [..., out, in/group] (BF16 or F16).
func dequantMLX(w, s, b *safetensors.Tensor, bits, group int) ([]float32, error) {
	if s == nil || b == nil {
		return nil, fmt.Errorf("modelgen: %s: codes without scales and biases", w.Name)
	}
	sv, err := s.Float32()
	if err != nil {
		return nil, err
	}
	bv, err := b.Float32()
	if err != nil {
		return nil, err
	}
	words := int(w.Shape[len(w.Shape)-1])
	groups := int(s.Shape[len(s.Shape)-1])
	rows := int(w.NumElements()) / words
	if words*32%bits != 0 || words*32/bits != groups*group {
		return nil, fmt.Errorf("modelgen: %s: %d words and %d groups per row do not fit %d bits in groups of %d", w.Name, words, groups, bits, group)
	}
	in := groups * group
	raw := w.Data
	out := make([]float32, rows*in)
	for r := 0; r < rows; r++ {
		for i := 0; i < in; i++ {
			var q uint32
			for k := 0; k < bits; k++ {
				bit := i*bits + k
				word := binary.LittleEndian.Uint32(raw[4*(r*words+bit/32):])
				q |= (word >> (bit % 32) & 1) << k
			}
			gi := r*groups + i/group
			out[r*in+i] = float32(float64(sv[gi])*float64(q) + float64(bv[gi]))
		}
	}
	return out, nil
}
