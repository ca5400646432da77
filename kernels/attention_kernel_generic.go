//go:build !goexperiment.simd || !amd64

package kernels

// attnKernel names the attention micro-kernels this build runs.
const attnKernel = "go-2x4"

func attnScores(st, qt []float32, rp, d int, kr [][]float32) { attnScoresGo(st, qt, rp, d, kr) }

func attnPV(ot, st []float32, rp, d int, vr [][]float32) { attnPVGo(ot, st, rp, d, vr) }
