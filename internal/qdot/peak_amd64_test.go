//go:build amd64 && !purego

package qdot

import "testing"

// BenchmarkPeak: one core's throughput of the instruction each AVX-512 kernel is built on,
// independent register operands and no loads (peakVNNI, peakBF16), as GOP/s (VPDPBUSD: 128
// int8 operations an instruction) or GFLOP/s (VDPBF16PS: 64). BenchmarkQDot's figures over these
// are the kernels' share of the core's peak.
func BenchmarkPeak(b *testing.B) {
	const rounds = 1 << 20
	for _, p := range []struct {
		name string
		ok   bool
		ops  float64
		fn   func(int)
	}{{"vpdpbusd", hasAVX512VNNI, 128, peakVNNI}, {"vdpbf16ps", hasAVX512BF16, 64, peakBF16}} {
		b.Run(p.name, func(b *testing.B) {
			if !p.ok {
				b.Skipf("no %s on this CPU", p.name)
			}
			for b.Loop() {
				p.fn(rounds)
			}
			b.ReportMetric(float64(b.N)*rounds*12*p.ops/b.Elapsed().Seconds()/1e9, "GOP/s")
		})
	}
}
