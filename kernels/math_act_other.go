//go:build !amd64 || purego

package kernels

// This build has no assembly activation kernels. arm64 runs the portable forms: Go's arm64
// assembler names no vector float add, multiply, divide, round or convert (only FMLA/FMLS),
// so a NEON version would be hand-encoded instruction words; none is written yet.
const hasAsmAct = false

func actSigmoid8(dst, src *float32, n int, div float32) {
	panic("kernels: no assembly activation kernels in this build")
}

func actSiLU8(dst, src *float32, n int, div float32) {
	panic("kernels: no assembly activation kernels in this build")
}

func actSigmoidMul8(o, gate *float32, n int) {
	panic("kernels: no assembly activation kernels in this build")
}

func actSwiGLU8(h, gate, u *float32, n int) {
	panic("kernels: no assembly activation kernels in this build")
}

func actGRMean8(x, a, h *float32, D, S, n int, fS float32) {
	panic("kernels: no assembly activation kernels in this build")
}
