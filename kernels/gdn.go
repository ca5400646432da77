package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/op"
)

// Gated DeltaNet (Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta
// Rule", 2024), as used by the linear-attention layers of Qwen3-Next and Qwen3.8-Flash-Next.
// The math follows transformers' Qwen3NextGatedDeltaNet / Qwen4Exp gated delta net (v5.17):
// gdn_pre (short conv, silu, l2norm of q and k, gates), gdn_scan (the delta-rule recurrence,
// token by token or in chunks of op.GDNChunk), gdn_post (gated RMSNorm). The projections around
// them are plain GEMMs.

// gdnLen checks len(x) == want, naming the operand in the error.
func gdnLen(opName, name string, x []float32, want int) error {
	if len(x) != want {
		return fmt.Errorf("%s: len(%s)=%d, want %d: %w", opName, name, len(x), want, op.ErrShape)
	}
	return nil
}

func gdnSigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// gdnPre is gdn_pre: the depthwise causal short conv over the in_proj channels, silu, the split
// into q, k, v, the l2 norm and scale of q and k, and the gates.
//
// Inputs: qkv [T, C] float32, C = 2*Hk*Dk + Hv*Dv, the in_proj_qkv output (channels q | k | v,
// before the conv); a, b [T, Hv] the in_proj_a / in_proj_b outputs; convW [C, ConvK] the conv
// weight (convW[c][ConvK-1] multiplies the current token; no bias); ALog, dtBias [Hv].
// convState [ConvK-1, C] holds the previous ConvK-1 inputs, token-major, oldest first (zeros
// before the first token); it is read and then replaced by the last ConvK-1 inputs of the
// history (old state followed by qkv), so consecutive calls equal one call over the
// concatenated tokens.
//
// Outputs (must not alias the inputs): q, k [T, Hk, Dk] = l2norm(silu(conv)) per head, with
// l2norm(x) = x / sqrt(sum x^2 + 1e-6), and q further scaled by Dk^-0.5; v [T, Hv, Dv] =
// silu(conv); beta [T, Hv] = sigmoid(b); g [T, Hv] = -exp(ALog) * softplus(a + dtBias), the log
// decay (softplus(x) = x for x > 20, as torch). The conv sums are float32 in tap order; silu
// runs on the activation kernels (math_act.go: within 3.1 float32 ulp of its float64 value with
// the assembly, which gives 0 below x = -87.7 where the exact value is under |x| 2^-126; the
// float64 form rounded once in portable Go); the gates' exponentials and the norm sums are
// evaluated in float64 and rounded once.
//
// Errors wrap op.ErrShape (non-positive sizes, ConvK < 1, a length that does not match) or op.ErrInvalidArgument
// (Hv not a multiple of Hk, unknown Map).
func gdnPre(q, k, v, g, beta []float32, qkv, a, b []float32, convState, convW, ALog, dtBias []float32, p op.GDNParams) error {
	h := op.HostF32
	return execGDNPre(op.GDNPre{Q: h(q), K: h(k), V: h(v), G: h(g), Beta: h(beta), QKV: h(qkv), A: h(a), B: h(b),
		ConvState: h(convState), ConvW: convW, ALog: ALog, DtBias: dtBias, P: p})
}

func execGDNPre(args op.GDNPre) error {
	if err := args.Check(); err != nil {
		return err
	}
	p := args.P
	q, k, v, g, beta := args.Q.F32(), args.K.F32(), args.V.F32(), args.G.F32(), args.Beta.F32()
	qkv, a, b, convState := args.QKV.F32(), args.A.F32(), args.B.F32(), args.ConvState.F32()
	convW, ALog, dtBias := args.ConvW, args.ALog, args.DtBias
	C := p.Channels()
	T, K := p.T, p.ConvK

	qkC, vC := p.Hk*p.Dk, p.Hv*p.Dv
	const blk = 64
	nblk := (C + blk - 1) / blk
	parallelFor(nblk, 4, func(lo, hi int) {
		var acc [blk]float32
		wT := make([]float32, K*blk) // the block's conv taps, tap-major
		rows := make([]*float32, K)
		for bi := lo; bi < hi; bi++ {
			c0 := bi * blk
			c1 := min(c0+blk, C)
			n := c1 - c0
			for j := 0; j < K; j++ {
				for i := 0; i < n; i++ {
					wT[j*blk+i] = convW[(c0+i)*K+j]
				}
			}
			// A block inside one of q, k, v is written in place; one across two is scattered.
			var dst []float32
			var ld int
			switch {
			case c1 <= qkC:
				dst, ld = q[c0:], qkC
			case c0 >= qkC && c1 <= 2*qkC:
				dst, ld = k[c0-qkC:], qkC
			case c0 >= 2*qkC:
				dst, ld = v[c0-2*qkC:], vC
			}
			for t := 0; t < T; t++ {
				for j := 0; j < K; j++ {
					if r := t - (K - 1) + j; r < 0 {
						rows[j] = &convState[(r+K-1)*C+c0]
					} else {
						rows[j] = &qkv[r*C+c0]
					}
				}
				out := acc[:n]
				if dst != nil {
					out = dst[t*ld : t*ld+n]
				}
				gdnConv(out, rows, wT, blk)
				siluRow(out, out, 1)
				if dst != nil {
					continue
				}
				for i, y := range out {
					switch c := c0 + i; {
					case c < qkC:
						q[t*qkC+c] = y
					case c < 2*qkC:
						k[t*qkC+c-qkC] = y
					default:
						v[t*vC+c-2*qkC] = y
					}
				}
			}
		}
	})

	// The last ConvK-1 inputs become the state; copy handles the overlapping shift.
	if K > 1 {
		keep := K - 1
		if T >= keep {
			copy(convState, qkv[(T-keep)*C:T*C])
		} else {
			copy(convState, convState[T*C:])
			copy(convState[(keep-T)*C:], qkv)
		}
	}

	if err := gdnNormQK(q, k, T, p.Hk, p.Dk); err != nil {
		return err
	}
	parallelFor(T*p.Hv, 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			h := i % p.Hv
			beta[i] = float32(gdnSigmoid(float64(b[i])))
			x := float64(a[i]) + float64(dtBias[h])
			sp := x
			if x <= 20 {
				sp = math.Log1p(math.Exp(x))
			}
			g[i] = float32(-math.Exp(float64(ALog[h])) * sp)
		}
	})
	return nil
}

// gdnConv sets dst[i] = sum over j of w[j*ws+i] * rows[j][i] for i < len(dst), len(rows) taps
// (each row at least len(dst) elements): from +0, taps in order, each product and sum rounded to
// float32 (no fused multiply-add, so that the assembly and every compiler give the same bits).
func gdnConv(dst []float32, rows []*float32, w []float32, ws int) {
	n, n8 := len(dst), 0
	if n == 0 {
		return
	}
	_ = w[(len(rows)-1)*ws+n-1]
	if useAsmVec() {
		if n8 = n &^ 7; n8 > 0 {
			gdnConv8(&dst[0], &rows[0], &w[0], len(rows), ws, n8)
		}
	}
	for i := n8; i < n; i++ {
		var y float32
		for j, r := range rows {
			y += float32(w[j*ws+i] * unsafe.Slice(r, n)[i])
		}
		dst[i] = y
	}
}

// gdnNormQK normalises q and k [T, Hk, Dk] in place per head: x / sqrt(sum x^2 + 1e-6), and
// scales q by Dk^-0.5 (transformers' l2norm with use_qk_l2norm_in_kernel and the 1/sqrt(dk)
// query scale). The sum is taken in float64. It is the normalisation part of GDNPre alone.
// Errors wrap op.ErrShape when a size is not positive or a length is not T*Hk*Dk.
func gdnNormQK(q, k []float32, T, Hk, Dk int) error {
	const opName = "gdn_norm_qk"
	if T <= 0 || Hk <= 0 || Dk <= 0 {
		return fmt.Errorf("%s: T=%d Hk=%d Dk=%d must be positive: %w", opName, T, Hk, Dk, op.ErrShape)
	}
	if err := gdnLen(opName, "q", q, T*Hk*Dk); err != nil {
		return err
	}
	if err := gdnLen(opName, "k", k, T*Hk*Dk); err != nil {
		return err
	}
	scale := 1 / math.Sqrt(float64(Dk))
	parallelFor(T*Hk, 64, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gdnL2Norm(q[i*Dk:(i+1)*Dk], scale)
			gdnL2Norm(k[i*Dk:(i+1)*Dk], 1)
		}
	})
	return nil
}

func gdnL2Norm(x []float32, scale float64) {
	var s float64
	for _, e := range x {
		s += float64(e) * float64(e)
	}
	f := scale / math.Sqrt(s+1e-6)
	for i, e := range x {
		x[i] = float32(float64(e) * f)
	}
}

// gdnPost is gdn_post, the gated RMSNorm of the scan output per value head over Dv:
// y = w * (o / sqrt(mean(o^2) + eps)) * act(z), act sigmoid or silu (transformers'
// RMSNormGated; the weight is plain, not 1+w). y, o, z [T, Hv, Dv] float32, w [Dv]; y may alias
// o or z. The mean is evaluated in float64 and rounded once; the activation is the row kernels'
// (sigmoidRow, siluRow: within 2.2 and 3.1 float32 ulp of float64 on the assembly set, which
// flushes both to 0 below z = -87.7, where the exact values are under 2^-126 and |z| 2^-126;
// float64 rounded once on the Go set).
// Errors wrap op.ErrShape (sizes, lengths) or op.ErrInvalidArgument (unknown act, eps < 0 or NaN).
func gdnPost(y, o, z []float32, T, Hv, Dv int, w []float32, eps float32, act op.GateAct) error {
	return execGDNPost(op.GDNPost{Y: op.HostF32(y), O: op.HostF32(o), Z: op.HostF32(z), T: T, Hv: Hv, Dv: Dv, W: w, Eps: eps, Act: act})
}

func execGDNPost(a op.GDNPost) error {
	if err := a.Check(); err != nil {
		return err
	}
	y, o, z, w, eps, act := a.Y.F32(), a.O.F32(), a.Z.F32(), a.W, a.Eps, a.Act
	Hv, Dv := a.Hv, a.Dv
	parallelFor(a.T*Hv, 64, func(lo, hi int) {
		gate := make([]float32, Dv)
		for i := lo; i < hi; i++ {
			or, zr, yr := o[i*Dv:(i+1)*Dv], z[i*Dv:(i+1)*Dv], y[i*Dv:(i+1)*Dv]
			var s float64
			for _, e := range or {
				s += float64(e) * float64(e)
			}
			r := 1 / math.Sqrt(s/float64(Dv)+float64(eps))
			if act == op.ActSilu {
				siluRow(gate, zr, 1)
			} else {
				sigmoidRow(gate, zr, 1)
			}
			for d, g := range gate {
				yr[d] = w[d] * float32(float64(or[d])*r) * g
			}
		}
	})
	return nil
}
