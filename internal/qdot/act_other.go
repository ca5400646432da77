//go:build !amd64 || purego

package qdot

// No quantization kernels in this build: quantBlock runs its portable loop.
var hasQuantAsm = false

func amaxBitsAVX2(*float32, int) uint32 { panic("qdot: no AVX2 quantization kernel in this build") }

func codesAVX2(*int8, *float32, int, float64) int32 {
	panic("qdot: no AVX2 quantization kernel in this build")
}

func roundBF16AVX2(*uint16, *float32, int) { panic("qdot: no AVX2 rounding kernel in this build") }
