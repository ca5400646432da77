package strata

import (
	"runtime/debug"
)

// memoryFor reports whether need more bytes fit in memory, and how many are available: the
// system's available memory (memAvailable: Linux MemAvailable, the physical memory elsewhere)
// capped by the Go memory limit when one is set (GOMEMLIMIT), plus held, memory the caller
// already owns and would reuse. ok is true when the available memory is unknown.
func memoryFor(need, held int64) (ok bool, avail int64) {
	avail, known := memAvailable()
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < 1<<62 && (!known || lim < avail) {
		avail, known = lim, true
	}
	if !known {
		return true, -1
	}
	avail += held
	return need <= avail, avail
}

// mib formats a byte count in MiB for error messages.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// checkMemory refuses, before any allocation, a prefill whose steps of step tokens (T in all)
// would need more activation memory than is available: the scratch tensors of one step (the
// runner's and the ops' own temporaries, stepBytes), the logits of every token with allLogits
// (held twice: the device copy and the result), and nothing else that grows with T. Errors wrap
// ErrOutOfMemory naming both byte counts.
func (s *Session) checkMemory(step, T int, allLogits bool) error {
	need := s.m.stepBytes(step)
	if allLogits {
		need += 2 * 4 * int64(T) * int64(s.m.cfg.Vocab)
	}
	held := s.scratch.Bytes()
	if ok, avail := memoryFor(need, held); !ok {
		return wrapf(ErrOutOfMemory, nil, "a prefill step of %d tokens needs about %.0f MiB of activations%s, %.0f MiB are available (a smaller PrefillOptions.Step needs less)",
			step, mib(need), map[bool]string{true: " and logits of every token", false: ""}[allLogits], mib(avail))
	}
	return nil
}

// stepBytes estimates the scratch bytes of one prefill step of T tokens: every named tensor the
// runner takes from the session's scratch (forward.go; the largest of each name over the layer
// kinds) and the largest temporaries the ops allocate themselves (the GatedResidual read's
// normalised streams and mixing products, the grouped expert GEMMs' gathered rows and
// activations). TestStepBytes holds it to the CPU backend's measured scratch.
func (m *Model) stepBytes(T int) int64 {
	c := m.cfg
	t, D := int64(T), int64(c.D)
	S := int64(max(c.Streams, 1))
	f := t * (1 + 2*S*D + 2*D + S) // tokens, H, Hn, x, u, beta
	var gdn, attn, moe, ple, mlp int64
	for _, ly := range m.layers {
		if ly.gdn != nil {
			Hk, Hv, dk, dv := int64(c.Hk), int64(c.Hv), int64(c.Dk), int64(c.Dv)
			C := 2*Hk*dk + Hv*dv
			gdn = max(gdn, t*(C+2*Hv*dv+4*Hv+2*Hk*dk+Hv*dv))
		}
		if a := ly.attn; a != nil {
			Hq, Hkv, hd := int64(c.Hq), int64(c.Hkv), int64(c.HeadDim)
			n := t * (2*Hq*hd + 2*Hkv*hd + 3*Hq*hd)
			if a.idx != nil {
				nh, dh := int64(c.IdxHeads), int64(c.IdxDim)
				// one selection token tensor per attention layer: at most budget + ratio per row
				n += t*((nh+1)*dh+nh*dh) + t*int64(c.IdxBudget+c.IdxRatio)*int64(len(m.layers))
			}
			attn = max(attn, n)
		}
		if mw := ly.moe; mw != nil {
			E, K, I, Is := int64(c.Experts), int64(c.TopK), int64(c.MoEI), int64(mw.shared.I)
			moe = max(moe, t*(E+3*K+K*D+D+1+3*Is)+t*K*(D+3*I)) // + the grouped GEMMs' rows
		}
		if ly.mlp != nil {
			mlp = max(mlp, 3*t*int64(ly.mlp.I))
		}
		if ly.ple != nil {
			ple += t * int64(ly.ple.hash.Heads())
		}
	}
	gr := t * (2*S*D + int64(c.HCRank)) // GRRead's temporaries
	return 4 * (f + gdn + attn + moe + mlp + ple + gr + D)
}
