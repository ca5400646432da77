package strata

import (
	"fmt"
	"runtime/debug"
)

// memLimit is one limit on the memory this process can still take: the bytes it leaves, and
// what it is, in words for error messages.
type memLimit struct {
	avail int64
	what  string
}

// memoryFor reports whether need more bytes fit in memory, how many are available and the limit
// that gives that figure: the smallest of the platform's limits (memLimits: on Linux
// MemAvailable, the RLIMIT_AS and RLIMIT_DATA headroom and the cgroup memory headroom; the
// physical memory on macOS) and the Go memory limit when one is set (GOMEMLIMIT), plus held,
// memory the caller already owns and would reuse. ok is true when no limit is known.
func memoryFor(need, held int64) (ok bool, avail int64, limit string) {
	lims := memLimits()
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < 1<<62 {
		lims = append(lims, memLimit{lim, fmt.Sprintf("the Go memory limit (GOMEMLIMIT) of %.0f MiB", mib(lim))})
	}
	if len(lims) == 0 {
		return true, -1, ""
	}
	least := lims[0]
	for _, l := range lims[1:] {
		if l.avail < least.avail {
			least = l
		}
	}
	avail = max(least.avail, 0) + held
	return need <= avail, avail, least.what
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
		need += 2 * 4 * int64(T) * int64(s.m.plan.Vocab)
	}
	held := s.scratch.Bytes()
	if ok, avail, limit := memoryFor(need, held); !ok {
		return wrapf(ErrOutOfMemory, nil, "a prefill step of %d tokens needs about %.0f MiB of activations%s, %.0f MiB are available (limit: %s; a smaller PrefillOptions.Step needs less)",
			step, mib(need), map[bool]string{true: " and logits of every token", false: ""}[allLogits], mib(avail), limit)
	}
	return nil
}

// stepBytes estimates the scratch bytes of one prefill step of T tokens: every named tensor the
// runner takes from the session's scratch (forward.go; the largest of each name over the layers'
// blocks, the GDN and attention mixers' one shared buffer) and the largest temporaries the ops allocate themselves (the GatedResidual read's
// normalised streams and mixing products, the grouped expert GEMMs' gathered rows and
// activations). TestStepBytes holds it to the CPU backend's measured scratch.
func (m *Model) stepBytes(T int) int64 {
	t, D, S := int64(T), int64(m.plan.D), int64(m.plan.Streams)
	f := t * (1 + 2*S*D + 2*D + S)       // tokens, H, Hn, x, u, beta
	var mix, idx, moe, ple, mlp, R int64 // mix: the mixer buffer the GDN and attention layers share
	for _, p := range m.layers {
		if g := p.GDN; g != nil {
			Hk, Hv, dk, dv := int64(g.Hk), int64(g.Hv), int64(g.Dk), int64(g.Dv)
			mix = max(mix, t*(int64(g.Channels())+2*Hv*dv+4*Hv+2*Hk*dk+Hv*dv)+10*mixerAlign)
		}
		if a := p.Attn; a != nil {
			Hq, Hkv, hd := int64(a.Hq), int64(a.Hkv), int64(a.HeadDim)
			mix = max(mix, t*(2*Hq*hd+2*Hkv*hd+3*Hq*hd)+6*mixerAlign)
			if x := a.Indexer; x != nil {
				nh, dh := int64(x.Heads), int64(x.Dim)
				// one selection token tensor per attention layer: at most budget + ratio per row
				idx = max(idx, t*((nh+1)*dh+nh*dh)+t*int64(x.Budget+x.Ratio)*int64(len(m.layers)))
			}
		}
		if mw := p.MoE; mw != nil {
			E, K, I, Is := int64(mw.E), int64(mw.TopK), int64(mw.I), int64(mw.Shared.I)
			moe = max(moe, t*(E+3*K+K*D+D+1+3*Is)+t*K*(D+3*I)) // + the grouped GEMMs' rows
		}
		if d := p.MLP; d != nil {
			mlp = max(mlp, 3*t*int64(d.I))
		}
		if x := p.PLE; x != nil {
			ple += t * int64(x.Heads())
		}
		for _, r := range []readBlock{p.In, p.Post} {
			if r.GR != nil {
				R = max(R, int64(r.GR.R))
			}
		}
	}
	gr := t * (2*S*D + R) // GRRead's temporaries
	return 4 * (f + mix + idx + moe + mlp + ple + gr + D)
}
