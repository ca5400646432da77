package optest

import (
	"fmt"
	"math"
	"sort"

	"github.com/stratakernels/strata/op"
)

// Generators of FP8Block and QFloat weights: standard-normal values quantized the way their
// producers do (a scale from each block's or group's largest magnitude, codes rounded to the
// nearest representable value), so that the codes cover the formats' whole range (E4M3
// subnormals and 448 included) with a realistic distribution.

// encE4M3 is the E4M3 code nearest to v, saturating at +-448 (ties to the smaller magnitude).
func encE4M3(v float64) uint8 {
	var sign uint8
	if v < 0 {
		sign, v = 0x80, -v
	}
	// The finite magnitudes of codes 0 .. 0x7e increase with the code.
	b := sort.Search(0x7f, func(i int) bool { return e4m3Table[i] >= v })
	if b == 0x7f {
		return sign | 0x7e
	}
	if b > 0 && v-e4m3Table[b-1] <= e4m3Table[b]-v {
		b--
	}
	return sign | uint8(b)
}

// encE2M1 is the E2M1 code nearest to v, saturating at +-6 (ties to the smaller magnitude).
func encE2M1(v float64) uint8 {
	var sign uint8
	if v < 0 {
		sign, v = 8, -v
	}
	b := sort.Search(8, func(i int) bool { return e2m1Table[i] >= v })
	if b == 8 {
		return sign | 7
	}
	if b > 0 && v-e2m1Table[b-1] <= e2m1Table[b]-v {
		b--
	}
	return sign | uint8(b)
}

// RandFP8Block returns a deterministic FP8Block weight [n, k] holding Floats(seed, n*k, scale)
// quantized per 128 x 128 block (scale_inv = the block's largest magnitude / 448, rounded to
// scaleDT: BF16 or F32; codes the nearest E4M3 values of w / scale_inv), and its dequantized
// values (DequantFP8). Errors wrap op.ErrShape or op.ErrDType.
func RandFP8Block(seed uint64, n, k int, scaleDT op.DType, scale float32) (*op.Matrix, []float32, error) {
	if scaleDT != op.BF16 && scaleDT != op.F32 {
		return nil, nil, fmt.Errorf("RandFP8Block: %w: %v scales", op.ErrDType, scaleDT)
	}
	x := Floats(seed, n*k, scale)
	grid := op.FP8Grid(n, k)
	const B = op.FP8BlockSize
	amax := make([]float32, grid[0]*grid[1])
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			g := i/B*grid[1] + j/B
			amax[g] = max(amax[g], float32(math.Abs(float64(x[i*k+j]))))
		}
	}
	s := make([]float32, len(amax))
	for g, a := range amax {
		s[g] = a / 448
		if a == 0 {
			s[g] = 1
		}
	}
	f := &op.BlockFP8{Codes: make([]uint8, n*k), ScaleDType: scaleDT, Grid: grid}
	var sw []float32
	if scaleDT == op.BF16 {
		f.Scales, sw = Round16(s, op.BF16)
	} else {
		f.ScalesF32, sw = s, s
	}
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			f.Codes[i*k+j] = encE4M3(float64(x[i*k+j]) / float64(sw[i/B*grid[1]+j/B]))
		}
	}
	m, err := op.NewMatrixFP8Block(n, k, f)
	if err != nil {
		return nil, nil, err
	}
	return m, DequantFP8(m), nil
}

// RandQFloat returns a deterministic QFloat weight [n, k] in mode holding Floats(seed, n*k,
// scale) quantized per group as mlx.core.quantize does on the GPU (the scale from the group's
// largest magnitude over the largest code, 6 or 448: E8M0 the smallest power of two not below it,
// as mlx's mx_scale_round_up; the nearest E4M3 for nvfp4; codes the nearest values of
// w / scale), and its dequantized values (DequantQFloat). Errors wrap op.ErrUnsupported.
func RandQFloat(seed uint64, n, k int, mode op.QuantMode, scale float32) (*op.Matrix, []float32, error) {
	bits, g := mode.Bits(), mode.Group()
	if bits == 0 || k%g != 0 {
		return nil, nil, fmt.Errorf("RandQFloat: %w: mode %v, K=%d", op.ErrUnsupported, mode, k)
	}
	x := Floats(seed, n*k, scale)
	maxCode := 6.0
	if mode == op.MXFP8 {
		maxCode = 448
	}
	q := &op.QuantFloat{Mode: mode, Codes: make([]uint32, n*k*bits/32), Scales: make([]uint8, n*k/g)}
	for grp := range q.Scales {
		vals := x[grp*g : (grp+1)*g]
		var amax float64
		for _, v := range vals {
			amax = max(amax, math.Abs(float64(v)))
		}
		var sd float64 // the decoded scale
		if mode == op.NVFP4 {
			q.Scales[grp] = encE4M3(amax / maxCode)
			sd = e4m3Table[q.Scales[grp]]
		} else {
			e := 0
			if amax > 0 {
				e = int(math.Ceil(math.Log2(amax / maxCode)))
			}
			q.Scales[grp] = uint8(min(max(e+127, 1), 254))
			sd = E8M0(q.Scales[grp])
		}
		for i, v := range vals {
			var c uint8
			switch {
			case sd == 0:
			case mode == op.MXFP8:
				c = encE4M3(float64(v) / sd)
			default:
				c = encE2M1(float64(v) / sd)
			}
			e := grp*g + i // element index in the whole weight; rows hold whole words
			q.Codes[e*bits/32] |= uint32(c) << (e * bits % 32)
		}
	}
	m, err := op.NewMatrixQFloat(n, k, q)
	if err != nil {
		return nil, nil, err
	}
	return m, DequantQFloat(m), nil
}
