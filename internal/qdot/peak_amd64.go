//go:build amd64 && !purego

package qdot

// peakVNNI runs n rounds of 12 independent zmm VPDPBUSD (AVX-512 VNNI: 64 int8 multiply-adds,
// 128 operations each) and peakBF16 of 12 VDPBF16PS (AVX512_BF16: 32 bfloat16 multiply-adds,
// 64 flops each), register operands only: the instruction throughput the int8 and bf16 kernels
// are measured against (BenchmarkPeak).
//
//go:noescape
func peakVNNI(n int)

//go:noescape
func peakBF16(n int)
