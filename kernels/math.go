package kernels

import "math"

// Scalar activation functions shared by the CPU ops. Each takes and returns float32 and
// evaluates in float64 internally, so the rounding is a single float64->float32 step and the
// result does not depend on the platform's float32 library or on instruction fusion.

// sigmoid32 returns 1 / (1 + exp(-x)) (the logistic function used by the GatedResidual gates,
// the shared-expert gate, the PLE gate and the GDN beta).
func sigmoid32(x float32) float32 {
	return float32(sigmoid64(float64(x)))
}

// sigmoid64 is the logistic function in float64, written so that neither branch overflows.
func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// rsqrt64 returns 1/sqrt(x).
func rsqrt64(x float64) float64 {
	return 1 / math.Sqrt(x)
}
