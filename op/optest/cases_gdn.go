package optest

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// GDNCase is one Gated DeltaNet op case: T tokens, Hk qk heads of Dk, Hv value heads of Dv,
// short-conv kernel ConvK, and the head map (Tiled: value head h reads qk head h % Hk; else
// h / (Hv/Hk)). Seed picks the tensors of GDNCase.Inputs.
type GDNCase struct {
	Name                     string
	T, Hk, Hv, Dk, Dv, ConvK int
	Tiled                    bool
	Seed                     uint64
	Short                    bool
}

// Params is the case's op.GDNParams.
func (c GDNCase) Params() op.GDNParams {
	p := op.GDNParams{T: c.T, Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, ConvK: c.ConvK, Map: op.Grouped}
	if c.Tiled {
		p.Map = op.Tiled
	}
	return p
}

// FullName is the case's subtest name: Name and T.
func (c GDNCase) FullName() string { return fmt.Sprintf("%s_T%d", c.Name, c.T) }

// GDNInputs are the tensors of one case, float32, row-major.
type GDNInputs struct {
	// gdn_pre inputs: QKV [T, 2*Hk*Dk + Hv*Dv] (q | k | v channels, before the conv), A and B
	// [T, Hv] (in_proj_a / in_proj_b outputs), ConvW [C, ConvK], ConvState [ConvK-1, C],
	// ALog and DtBias [Hv].
	QKV, A, B, ConvW, ConvState, ALog, DtBias []float32
	// gdn_scan inputs: Q, K [T, Hk, Dk] raw (not yet l2-normalised), V [T, Hv, Dv], G (log
	// decay, in [-2.5, 0)) and Beta (in (0, 1)) [T, Hv], State [Hv, Dk, Dv].
	Q, K, V, G, Beta, State []float32
	// gdn_post inputs: Z [T, Hv, Dv] (the gate), NormW [Dv].
	Z, NormW []float32
}

// GDNCases is the Gated DeltaNet case table: edge lengths around the chunk of 64 (1, 3, 63, 64,
// 65, 300), value heads per qk head 1 and 3, small odd head sizes (tails of every register
// block, Dk != Dv to catch transposes) and the real 128, both head maps; then T = 17.
func GDNCases() []GDNCase {
	var cs []GDNCase
	seed := uint64(1)
	add := func(name string, T, Hk, Hv, Dk, Dv int, tiled, short bool) {
		cs = append(cs, GDNCase{Name: name, T: T, Hk: Hk, Hv: Hv, Dk: Dk, Dv: Dv, ConvK: 4, Tiled: tiled, Seed: seed, Short: short})
		seed++
	}
	for _, T := range []int{1, 3, 63, 64, 65, 300} {
		add("r1_dk12_dv20", T, 2, 2, 12, 20, false, shortT(T))
		add("r3_grouped_dk16_dv8", T, 2, 6, 16, 8, false, T == 3 || T == 65)
	}
	for _, T := range []int{3, 65, 300} {
		add("r3_tiled_dk16_dv8", T, 2, 6, 16, 8, true, T == 65)
	}
	for _, T := range []int{1, 64, 65, 300} {
		add("r3_real_dk128", T, 1, 3, 128, 128, false, T == 1)
	}
	add("r1_real_dk128", 130, 2, 2, 128, 128, false, false)
	add("r1_dk12_dv20", 17, 2, 2, 12, 20, false, false)
	add("r3_tiled_dk16_dv8", 17, 2, 6, 16, 8, true, false)
	return cs
}

// Channels is the conv channel count 2*Hk*Dk + Hv*Dv.
func (c GDNCase) Channels() int { return 2*c.Hk*c.Dk + c.Hv*c.Dv }

// Inputs generates the case's tensors deterministically from Seed (splitmix64, the same on every
// platform). Scales are those of a trained layer: unit-range activations, a decaying state.
func (c GDNCase) Inputs() GDNInputs {
	r := splitmix{state: c.Seed*0x9E3779B97F4A7C15 + 12345}
	C := c.Channels()
	in := GDNInputs{
		QKV: r.fillRange(c.T*C, -2, 2), A: r.fillRange(c.T*c.Hv, -3, 3), B: r.fillRange(c.T*c.Hv, -3, 3),
		ConvW: r.fillRange(C*c.ConvK, -0.6, 0.6), ConvState: r.fillRange((c.ConvK-1)*C, -2, 2),
		ALog: r.fillRange(c.Hv, -1, 1.5), DtBias: r.fillRange(c.Hv, -2, 1),
		Q: r.fillRange(c.T*c.Hk*c.Dk, -1, 1), K: r.fillRange(c.T*c.Hk*c.Dk, -1, 1), V: r.fillRange(c.T*c.Hv*c.Dv, -1, 1),
		G: r.fillRange(c.T*c.Hv, -2.5, -0.001), Beta: r.fillRange(c.T*c.Hv, 0.02, 0.98),
		State: r.fillRange(c.Hv*c.Dk*c.Dv, -0.5, 0.5),
		Z:     r.fillRange(c.T*c.Hv*c.Dv, -3, 3), NormW: r.fillRange(c.Dv, 0.5, 1.5),
	}
	return in
}

// GDNScanFLOPs is the nominal FLOP count of a chunked scan of T tokens per value head with
// head sizes dk, dv and chunk C: per chunk the products K K^T, Q K^T (2 C^2 dk each), U and W
// (2 C^2 dv, 2 C^2 dk), W S and Q S (2 C dk dv each), the intra-chunk attention times Vn
// (2 C^2 dv), the state update K^T Vn (2 C dk dv) and the triangular inverse (C^3 / 3), i.e.
// about 182K per token at C = 64, dk = dv = 128 (the count of fla's chunk_gated_delta_rule).
func GDNScanFLOPs(T, dk, dv, C int) float64 {
	c, k, v := float64(C), float64(dk), float64(dv)
	perChunk := 2*c*c*k*3 + 2*c*c*v*2 + 2*c*k*v*3 + c*c*c/3
	return perChunk * float64(T) / c
}
