package kernels

import "math"

// The activations of the MoE experts (SwiGLU's silu) and of the GatedResidual gates (sigmoid)
// run once per element of [T, I] and [T, S*D] tensors, millions per layer; math.Exp made them
// cost as much as the GEMMs around them. These versions evaluate e^x with a short polynomial in
// float64 (error about 5e-9 relative, a tenth of a float32 ulp) and round once to float32, so
// they agree with the float64 definitions to within one float32 ulp. Pure scalar arithmetic:
// the same bits on every run and every core count.

// expNonPos64 returns e^x for x <= 0, and 0 for x below -708 (which keeps 2^k a normal
// float64; e^-708 times any float32 rounds to zero in float32, and -Inf gives 0 as the limit
// does). Range reduction x = k ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial of e^r
// scaled by 2^k.
func expNonPos64(x float64) float64 {
	if x < -708 {
		return 0
	}
	k := float64(int64(x*math.Log2E - 0.5)) // rounds x/ln2 to within 1/2 (x <= 0)
	r := x - k*math.Ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// sigmoidFast64 is the logistic function 1 / (1 + e^-x) through expNonPos64 (NaN stays NaN).
func sigmoidFast64(x float64) float64 {
	if x != x {
		return x
	}
	if x >= 0 {
		return 1 / (1 + expNonPos64(-x))
	}
	e := expNonPos64(x)
	return e / (1 + e)
}

// sigmoidFast32 is sigmoid32 through sigmoidFast64.
func sigmoidFast32(x float32) float32 { return float32(sigmoidFast64(float64(x))) }

// siluFast32 is silu32 (x * sigmoid(x)) through sigmoidFast64.
func siluFast32(x float32) float32 {
	v := float64(x)
	return float32(v * sigmoidFast64(v))
}
