package qdot

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// Test data: weights drawn from a normal distribution and quantized the way MLX and the FP8
// checkpoints do it, activations with a few outlier channels (as a transformer's hidden states
// have), and float64 references.

// randActs is x [T, K]: unit normal, every 37th channel scaled by 8.
func randActs(r *rand.Rand, T, K int) []float32 {
	x := make([]float32, T*K)
	for i := range x {
		v := r.NormFloat64()
		if (i%K)%37 == 5 {
			v *= 8
		}
		x[i] = float32(v)
	}
	return x
}

// randWeights is W [N, K] with normal values of standard deviation 0.05.
func randWeights(r *rand.Rand, N, K int) []float64 {
	w := make([]float64, N*K)
	for i := range w {
		w[i] = 0.05 * r.NormFloat64()
	}
	return w
}

// quantizeAffine quantizes w [N, K] as mlx.core.quantize does in affine mode: per group, scale
// (max-min)/(2^bits-1) and bias min, both rounded to bfloat16, codes round((w-bias)/scale)
// clamped. It returns the weight and its dequantized values.
func quantizeAffine(w []float64, N, K, bits, group int) (*Affine, []float64) {
	a := &Affine{N: N, K: K, Bits: bits, Group: group,
		Codes:  make([]uint32, N*K*bits/32),
		Scales: make([]uint16, N*K/group), Biases: make([]uint16, N*K/group)}
	deq := make([]float64, N*K)
	wpr := K * bits / 32
	top := float64(int(1)<<bits - 1)
	for n := 0; n < N; n++ {
		for g := 0; g < K/group; g++ {
			run := w[n*K+g*group : n*K+(g+1)*group]
			lo, hi := run[0], run[0]
			for _, v := range run {
				lo, hi = min(lo, v), max(hi, v)
			}
			sb := ToBF16(float32((hi - lo) / top))
			bb := ToBF16(float32(lo))
			a.Scales[n*(K/group)+g], a.Biases[n*(K/group)+g] = sb, bb
			s, b := float64(widen16(sb, false)), float64(widen16(bb, false))
			for i, v := range run {
				q := 0.0
				if s != 0 {
					q = math.Min(math.Max(math.Round((v-b)/s), 0), top)
				}
				k := g*group + i
				bit := k * bits
				word := n*wpr + bit/32
				a.Codes[word] |= uint32(q) << (bit % 32)
				if bit%32+bits > 32 {
					a.Codes[word+1] |= uint32(q) >> (32 - bit%32)
				}
				deq[n*K+k] = s*q + b
			}
		}
	}
	return a, deq
}

// e4m3Sorted are the finite non-negative E4M3 values and their codes, ascending.
var e4m3Vals, e4m3Codes = func() (v []float64, c []uint8) {
	for code := 0; code < 0x7f; code++ {
		v = append(v, float64(E4M3(uint8(code))))
		c = append(c, uint8(code))
	}
	return
}()

// toE4M3 rounds v to the nearest E4M3 value (ties to the even code), saturating at 448.
func toE4M3(v float64) uint8 {
	vals, codes := e4m3Vals, e4m3Codes
	a := math.Abs(v)
	i := sort.SearchFloat64s(vals, a)
	switch {
	case i == len(vals):
		i--
	case i > 0 && (a-vals[i-1] < vals[i]-a || a-vals[i-1] == vals[i]-a && codes[i-1]&1 == 0):
		i--
	}
	c := codes[i]
	if v < 0 {
		c |= 0x80
	}
	return c
}

// quantizeFP8 quantizes w [N, K] as the fine-grained FP8 checkpoints do: per 128x128 block,
// scale_inv = amax/448 and codes e4m3(w / scale_inv). It returns the weight and its values.
func quantizeFP8(w []float64, N, K int) (*FP8, []float64) {
	nb, kb := ceilDiv(N, FP8Block), ceilDiv(K, FP8Block)
	f := &FP8{N: N, K: K, Codes: make([]uint8, N*K), ScaleInv: make([]float32, nb*kb)}
	deq := make([]float64, N*K)
	for bn := 0; bn < nb; bn++ {
		for bk := 0; bk < kb; bk++ {
			var amax float64
			for n := bn * FP8Block; n < min(N, (bn+1)*FP8Block); n++ {
				for k := bk * FP8Block; k < min(K, (bk+1)*FP8Block); k++ {
					amax = max(amax, math.Abs(w[n*K+k]))
				}
			}
			s := float32(amax / 448)
			f.ScaleInv[bn*kb+bk] = s
			for n := bn * FP8Block; n < min(N, (bn+1)*FP8Block); n++ {
				for k := bk * FP8Block; k < min(K, (bk+1)*FP8Block); k++ {
					c := toE4M3(w[n*K+k] / float64(s))
					f.Codes[n*K+k] = c
					deq[n*K+k] = float64(E4M3(c)) * float64(s)
				}
			}
		}
	}
	return f, deq
}

// matmul64 is y [T, N] = x w^T in float64.
func matmul64(x []float64, w []float64, T, N, K int) []float64 {
	y := make([]float64, T*N)
	for t := 0; t < T; t++ {
		for n := 0; n < N; n++ {
			var s float64
			for k := 0; k < K; k++ {
				s += x[t*K+k] * w[n*K+k]
			}
			y[t*N+n] = s
		}
	}
	return y
}

// to64 widens a float32 slice.
func to64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// dequantActs is the activations x~ = scale * q of a, [T, K].
func dequantActs(a *Int8Act) []float64 {
	x := make([]float64, a.T*a.K)
	for t := 0; t < a.T; t++ {
		for k := 0; k < a.K; k++ {
			q, s := a.At(t, k)
			x[t*a.K+k] = float64(q) * float64(s)
		}
	}
	return x
}

// relErr is max |got - want| / max |want| and the relative RMS error sqrt(sum d^2 / sum want^2),
// over y read with row stride ldy and width N.
func relErr(got []float32, ldy int, want []float64, T, N int) (maxRel, rms float64) {
	var md, mw, sd, sw float64
	for t := 0; t < T; t++ {
		for n := 0; n < N; n++ {
			d := float64(got[t*ldy+n]) - want[t*N+n]
			md, mw = max(md, math.Abs(d)), max(mw, math.Abs(want[t*N+n]))
			sd += d * d
			sw += want[t*N+n] * want[t*N+n]
		}
	}
	return md / mw, math.Sqrt(sd / sw)
}

// sameBits fails the test at the first element of got that differs from want in its bits.
func sameBits(t *testing.T, what string, got, want []float32, ldy, T, N int) {
	t.Helper()
	for i := 0; i < T; i++ {
		for j := 0; j < N; j++ {
			g, w := got[i*ldy+j], want[i*ldy+j]
			if math.Float32bits(g) != math.Float32bits(w) {
				t.Fatalf("%s: y[%d, %d] = %g (%08x), want %g (%08x)", what, i, j, g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}
