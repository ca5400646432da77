package modelgen

import (
	"math"
	"sort"

	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// The 8- and 4-bit float formats of the FP8 releases and of MLX's float quantization modes
// (op/weights_fp.go), encoded as the writers of those files encode them: transformers'
// fine-grained FP8 quantizer (quantizers/quantizer_finegrained_fp8.py) and mlx's fp_quantize
// (mlx/ops.cpp, its portable path).

// e4m3Values are the finite non-negative E4M3 values, by code 0x00..0x7e (increasing).
var e4m3Values = func() (v [0x7f]float64) {
	for c := range v {
		v[c] = decodeE4M3(uint8(c))
	}
	return v
}()

// decodeE4M3 is the value of an E4M3 (float8_e4m3fn) code: (-1)^s 2^(e-7) (1 + m/8), the
// subnormals m 2^-9, NaN for 0x7f and 0xff.
func decodeE4M3(c uint8) float64 {
	e, m := int(c>>3&15), float64(c&7)
	var v float64
	switch {
	case c&0x7f == 0x7f:
		return math.NaN()
	case e == 0:
		v = m * 0x1p-9
	default:
		v = math.Ldexp(1+m/8, e-7)
	}
	if c&0x80 != 0 {
		return -v
	}
	return v
}

// encodeE4M3 rounds x to the nearest E4M3 code, ties to the even code, saturating at +-448 (as
// torch's clamp before its cast, and mlx's to_fp8, do). -0 keeps its sign.
func encodeE4M3(x float64) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign, x = 0x80, -x
	}
	if x >= 448 {
		return sign | 0x7e
	}
	i := sort.SearchFloat64s(e4m3Values[:], x) // first code whose value is >= x
	if e4m3Values[i] == x {
		return sign | uint8(i)
	}
	lo := i - 1
	if d0, d1 := x-e4m3Values[lo], e4m3Values[i]-x; d0 < d1 || d0 == d1 && lo%2 == 0 {
		return sign | uint8(lo)
	}
	return sign | uint8(i)
}

// e2m1Values is mlx's E2M1 lookup table by code (bit 3 the sign).
var e2m1Values = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// fp8Blocks quantizes a weight [n, k] (vals, float32) as transformers' fine-grained FP8 quantizer
// does: per block of 128 rows by 128 inputs (ragged at the edges) scale = 448 / max|w| in float32,
// codes e4m3(clamp(w * scale, -448, 448)), and the stored scale weight_scale_inv = 1 / scale
// rounded to dt (BF16 as the releases store it, or F32). An all-zero block gets scale 1.
func fp8Blocks(vals []float32, n, k int, dt safetensors.DType) (codes []uint8, inv []float32) {
	const B = op.FP8BlockSize
	g := op.FP8Grid(n, k)
	codes = make([]uint8, n*k)
	inv = make([]float32, g[0]*g[1])
	for bi := 0; bi < g[0]; bi++ {
		for bj := 0; bj < g[1]; bj++ {
			r0, r1, c0, c1 := bi*B, min(bi*B+B, n), bj*B, min(bj*B+B, k)
			amax := float32(0)
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					amax = max(amax, float32(math.Abs(float64(vals[r*k+c]))))
				}
			}
			scale := float32(1)
			if amax > 0 {
				scale = 448 / amax
			}
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					codes[r*k+c] = encodeE4M3(float64(vals[r*k+c] * scale))
				}
			}
			inv[bi*g[1]+bj] = roundTo(1/scale, dt)
		}
	}
	return codes, inv
}

// fp8Tensor quantizes a table with one scale for the whole tensor, the form of an FP8 release's
// n-gram table (docs/FORMATS.md section 4: w = e4m3(code) * weight_scale): the
// stored scale weight_scale = max|w| / 448 rounded to dt, codes e4m3(w / scale) over every value
// of the tensor's row blocks (amax their common maximum).
func fp8Tensor(vals []float32, amax float32, dt safetensors.DType) (codes []uint8, scale float32) {
	scale = float32(1)
	if amax > 0 {
		scale = roundTo(amax/448, dt)
	}
	codes = make([]uint8, len(vals))
	for i, v := range vals {
		codes[i] = encodeE4M3(float64(v) / float64(scale))
	}
	return codes, scale
}

// mlxFloatQuantize quantizes rows of k values (vals, exact widenings of dtype dt) in mlx's float
// mode m as mlx's fp_quantize does on the CPU, every step in the weight's dtype (each result
// rounded to dt): per group of m.Group() inputs the scale max|w| / maxval (6 for E2M1 codes, 448
// for E4M3); for groups of 32 the E8M0 exponent s = round(log2(scale)) (0 for a zero scale), the
// values divided by 2^s and the stored scale s + 127, for nvfp4 the scale rounded to E4M3 and the
// values divided by it; E2M1 codes are the index of the nearest entry of mlx's lookup table (the
// first on ties), E4M3 codes rounded to nearest even. Codes pack low bits first into uint32
// words.
func mlxFloatQuantize(vals []float32, k int, m op.QuantMode, dt safetensors.DType) (codes []uint32, scales []uint8) {
	g, bits := m.Group(), m.Bits()
	maxval := float32(6)
	if bits == 8 {
		maxval = 448
	}
	rows := len(vals) / k
	codes = make([]uint32, rows*k*bits/32)
	scales = make([]uint8, rows*k/g)
	q := make([]float32, g)
	for gi := range scales {
		grp := vals[gi*g : (gi+1)*g]
		amax := float32(0)
		for _, v := range grp {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := roundTo(amax/maxval, dt)
		if m == op.NVFP4 {
			scales[gi] = encodeE4M3(float64(s))
			d := float32(decodeE4M3(scales[gi]))
			for i, v := range grp {
				if d == 0 {
					q[i] = 0
				} else {
					q[i] = roundTo(v/d, dt)
				}
			}
		} else {
			e := 0
			if s != 0 {
				e = int(math.RoundToEven(float64(roundTo(float32(math.Log2(float64(s))), dt))))
			}
			scales[gi] = uint8(e + 127)
			for i, v := range grp {
				q[i] = roundTo(float32(math.Ldexp(float64(v), -e)), dt)
			}
		}
		for i, v := range q {
			var c uint32
			if bits == 8 {
				c = uint32(encodeE4M3(float64(v)))
			} else {
				best := float32(math.Inf(1))
				for j, l := range e2m1Values {
					if d := roundTo(float32(math.Abs(float64(roundTo(v-l, dt)))), dt); d < best {
						best, c = d, uint32(j)
					}
				}
			}
			at := (gi*g + i) * bits
			codes[at/32] |= c << (at % 32)
		}
	}
	return codes, scales
}
