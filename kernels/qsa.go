package kernels

import (
	"github.com/stratakernels/strata/op"

	"fmt"
	"math"
	"slices"
)

// QSASelect runs the QSA indexer for a prefill chunk and writes, for each query row, the key
// positions that row may attend into sel (its slices are reused when large enough).
//
// Math (transformers' Qwen4Exp indexer, modeling_qwen4_exp.py): the visible tokens 0..p of the
// query at position p = Pos0+t form nb = (p+1)/Ratio complete blocks plus a tail of
// p+1-Ratio*nb tokens. Block key b = RoPE(RMSNorm1p(mean of the Ratio raw keys of block b)) at
// position Ratio*b over the first Rot dims (inv_freq_i = Theta^(-2i/Rot), pairs (j, j+Rot/2));
// RMSNorm1p(x) = x * rsqrt(mean(x^2) + Eps) * (1 + kNorm). Block keys are computed once per call
// for every complete block, in float64, and rounded to float32. score_b = sum over heads h of
// relu(q_h . key_b) / sqrt(Dim), accumulated in float32. The row keeps the top
// keep = min(Budget/Ratio, nb) blocks and its tail. A row with keep = nb keeps everything and is
// marked dense (that is p+1 <= Ratio*(Budget/Ratio) + Ratio - 1, i.e. Budget + Ratio - 1 when
// Ratio divides Budget). Exact score ties resolve to the lower block index (torch.topk leaves
// the order unspecified); NaN scores rank below every number. Sparse rows list the tokens of
// their blocks in ascending order, then the tail.
//
// Shapes (float32): q [T, NHeads, Dim], the index queries already RMSNorm1p'd and RoPE'd at
// their positions; rawKeys [>= Pos0+T, Dim], the raw (unnormalised) index keys of every cached
// and new token; kNorm [Dim], the k_layernorm weight.
//
// Errors: op.ErrShape for non-positive sizes or slice lengths that do not match; op.ErrInvalidArgument for a nil
// sel, a negative Pos0, Budget < Ratio, an odd Rot or Rot > Dim, a non-positive Theta or a
// negative Eps. sel is not modified when an error is returned.
func QSASelect(sel *op.Selection, q []float32, rawKeys []float32, kNorm []float32, p op.IndexerParams) error {
	if err := firstErr(checkElems("QSASelect", "q", p.T, p.NHeads, p.Dim), checkElems("QSASelect", "rawKeys", p.Pos0+p.T, p.Dim)); err != nil {
		return err
	}
	if err := qsaCheck(sel, q, rawKeys, kNorm, p); err != nil {
		return err
	}
	keep := p.Budget / p.Ratio
	total, nbSparse := op.QSALayout(sel, p)
	if total == 0 {
		return nil
	}
	keys := qsaBlockKeys(rawKeys, kNorm, p, nbSparse)
	scale := float32(1 / math.Sqrt(float64(p.Dim)))
	parallelFor(p.T, 4, func(lo, hi int) {
		sc := make([]float32, nbSparse)
		buf := make([]float32, nbSparse)
		for t := lo; t < hi; t++ {
			if sel.Dense[t] {
				continue
			}
			pos := p.Pos0 + t
			nb := (pos + 1) / p.Ratio
			qsaScores(sc[:nb], q[t*p.NHeads*p.Dim:(t+1)*p.NHeads*p.Dim], keys, p.NHeads, p.Dim, scale)
			out := sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]]
			qsaEmit(out, sc[:nb], buf[:nb], keep, p.Ratio, pos)
		}
	})
	return nil
}

func qsaCheck(sel *op.Selection, q, rawKeys, kNorm []float32, p op.IndexerParams) error {
	if sel == nil {
		return fmt.Errorf("qsa select: nil selection: %w", op.ErrInvalidArgument)
	}
	if p.T <= 0 || p.NHeads <= 0 || p.Dim <= 0 || p.Ratio <= 0 {
		return fmt.Errorf("qsa select: T=%d NHeads=%d Dim=%d Ratio=%d must be positive: %w", p.T, p.NHeads, p.Dim, p.Ratio, op.ErrShape)
	}
	const lim = 1 << 30
	if p.T > lim || p.NHeads > lim || p.Dim > lim || p.Pos0 > lim || p.Budget > lim ||
		float64(p.Pos0+p.T)*float64(max(p.NHeads, 1))*float64(p.Dim) > 1<<40 {
		return fmt.Errorf("qsa select: sizes T=%d pos0=%d NHeads=%d Dim=%d Budget=%d too large: %w", p.T, p.Pos0, p.NHeads, p.Dim, p.Budget, op.ErrShape)
	}
	if p.Pos0 < 0 {
		return fmt.Errorf("qsa select: pos0=%d is negative: %w", p.Pos0, op.ErrInvalidArgument)
	}
	if p.Budget < p.Ratio {
		return fmt.Errorf("qsa select: budget %d below one block of %d tokens: %w", p.Budget, p.Ratio, op.ErrInvalidArgument)
	}
	if p.Rot < 0 || p.Rot%2 != 0 || p.Rot > p.Dim {
		return fmt.Errorf("qsa select: rotary dim %d must be even and within 0..%d: %w", p.Rot, p.Dim, op.ErrInvalidArgument)
	}
	if !(p.Theta > 0) || math.IsInf(p.Theta, 1) {
		return fmt.Errorf("qsa select: theta %v must be finite and positive: %w", p.Theta, op.ErrInvalidArgument)
	}
	if !(p.Eps >= 0) || math.IsInf(float64(p.Eps), 1) {
		return fmt.Errorf("qsa select: eps %v must be finite and non-negative: %w", p.Eps, op.ErrInvalidArgument)
	}
	if want := p.T * p.NHeads * p.Dim; len(q) != want {
		return fmt.Errorf("qsa select: len(q)=%d, want T*NHeads*Dim=%d: %w", len(q), want, op.ErrShape)
	}
	if want := (p.Pos0 + p.T) * p.Dim; len(rawKeys) < want || len(rawKeys)%p.Dim != 0 {
		return fmt.Errorf("qsa select: len(rawKeys)=%d, want a multiple of Dim=%d and >= (pos0+T)*Dim=%d: %w", len(rawKeys), p.Dim, want, op.ErrShape)
	}
	if len(kNorm) != p.Dim {
		return fmt.Errorf("qsa select: len(kNorm)=%d, want Dim=%d: %w", len(kNorm), p.Dim, op.ErrShape)
	}
	return nil
}

// qsaBlockKeys returns the keys [nb, Dim] of blocks 0..nb-1: pooled mean, RMSNorm1p, RoPE at the
// block's first position, all in float64, rounded once.
func qsaBlockKeys(rawKeys, kNorm []float32, p op.IndexerParams, nb int) []float32 {
	dim, half := p.Dim, p.Rot/2
	invFreq := make([]float64, half)
	for i := range invFreq {
		invFreq[i] = math.Pow(p.Theta, -float64(2*i)/float64(p.Rot))
	}
	keys := make([]float32, nb*dim)
	parallelFor(nb, 64, func(lo, hi int) {
		x := make([]float64, dim)
		for b := lo; b < hi; b++ {
			clear(x)
			for i := 0; i < p.Ratio; i++ {
				raw := rawKeys[(b*p.Ratio+i)*dim : (b*p.Ratio+i+1)*dim]
				for j, r := range raw {
					x[j] += float64(r)
				}
			}
			var ss float64
			for j := range x {
				x[j] /= float64(p.Ratio)
				ss += x[j] * x[j]
			}
			inv := 1 / math.Sqrt(ss/float64(dim)+float64(p.Eps))
			for j := range x {
				x[j] *= inv * (1 + float64(kNorm[j]))
			}
			qsaRope(x, invFreq, float64(b*p.Ratio))
			out := keys[b*dim : (b+1)*dim]
			for j := range out {
				out[j] = float32(x[j])
			}
		}
	})
	return keys
}

// qsaRope rotates the pairs (j, j+len(invFreq)) of x by pos*invFreq[j] (rotate_half form).
func qsaRope(x, invFreq []float64, pos float64) {
	half := len(invFreq)
	for j, f := range invFreq {
		s, c := math.Sincos(pos * f)
		a, b := x[j], x[j+half]
		x[j] = a*c - b*s
		x[j+half] = b*c + a*s
	}
}

// qsaScores writes sc[b] = scale * sum_h relu(q_h . key_b) for the len(sc) first blocks; heads
// are added in index order. NaN scores become -Inf so that they rank last.
func qsaScores(sc, q, keys []float32, nh, dim int, scale float32) {
	clear(sc)
	nb := len(sc)
	for h := 0; h < nh; h += 2 {
		q0 := q[h*dim : (h+1)*dim]
		q1 := q0
		two := h+1 < nh
		if two {
			q1 = q[(h+1)*dim : (h+2)*dim]
		}
		b := 0
		for ; b+4 <= nb; b += 4 {
			a00, a01, a02, a03, a10, a11, a12, a13 := qsaDot2x4(q0, q1,
				keys[b*dim:(b+1)*dim], keys[(b+1)*dim:(b+2)*dim], keys[(b+2)*dim:(b+3)*dim], keys[(b+3)*dim:(b+4)*dim])
			s := sc[b : b+4 : b+4]
			s[0] += max(a00, 0)
			s[1] += max(a01, 0)
			s[2] += max(a02, 0)
			s[3] += max(a03, 0)
			if two {
				s[0] += max(a10, 0)
				s[1] += max(a11, 0)
				s[2] += max(a12, 0)
				s[3] += max(a13, 0)
			}
		}
		for ; b < nb; b++ {
			a0, a1 := qsaDot2x1(q0, q1, keys[b*dim:(b+1)*dim])
			sc[b] += max(a0, 0)
			if two {
				sc[b] += max(a1, 0)
			}
		}
	}
	negInf := float32(math.Inf(-1))
	for b := range sc {
		s := sc[b] * scale
		if s != s {
			s = negInf
		}
		sc[b] = s
	}
}

// qsaEmit writes the tokens of the keep best blocks of sc (ties to the lower index) in
// ascending order, then the tail tokens Ratio*nb..pos, into out.
func qsaEmit(out []int32, sc, buf []float32, keep, ratio, pos int) {
	copy(buf, sc)
	thr := qsaKthLargest(buf, keep)
	gt := 0
	for _, s := range sc {
		if s > thr {
			gt++
		}
	}
	ties := keep - gt
	n := 0
	for b, s := range sc {
		if s > thr || (s == thr && ties > 0) {
			if s == thr {
				ties--
			}
			for i := 0; i < ratio; i++ {
				out[n] = int32(b*ratio + i)
				n++
			}
		}
	}
	for tok := len(sc) * ratio; tok <= pos; tok++ {
		out[n] = int32(tok)
		n++
	}
}

// qsaKthLargest returns the k-th largest value of a (1 <= k <= len(a), no NaN), reordering a:
// a deterministic quickselect (median-of-three pivots) that falls back to a full sort if the
// partitions degenerate.
func qsaKthLargest(a []float32, k int) float32 {
	target := k - 1
	lo, hi := 0, len(a)-1
	budget := 64
	for lo < hi {
		if budget == 0 {
			s := a[lo : hi+1]
			slices.SortFunc(s, func(x, y float32) int {
				if x > y {
					return -1
				}
				if x < y {
					return 1
				}
				return 0
			})
			return a[target]
		}
		budget--
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi]
		pivot := max(min(x, y), min(max(x, y), z))
		i, j := lo, hi
		for i <= j {
			for a[i] > pivot {
				i++
			}
			for a[j] < pivot {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		// Now a[lo..j] >= pivot, a[i..hi] <= pivot, and a[j+1..i-1] == pivot.
		switch {
		case target <= j:
			hi = j
		case target >= i:
			lo = i
		default:
			return a[target]
		}
	}
	return a[target]
}

// qsaDot2x4 returns the 8 dot products of rows q0, q1 with k0..k3 (all of len(q0)), each
// summed in index order.
func qsaDot2x4(q0, q1, k0, k1, k2, k3 []float32) (a00, a01, a02, a03, a10, a11, a12, a13 float32) {
	q1 = q1[:len(q0)]
	k0 = k0[:len(q0)]
	k1 = k1[:len(q0)]
	k2 = k2[:len(q0)]
	k3 = k3[:len(q0)]
	for i := range q0 {
		x0, x1 := q0[i], q1[i]
		y0, y1, y2, y3 := k0[i], k1[i], k2[i], k3[i]
		a00 += x0 * y0
		a01 += x0 * y1
		a02 += x0 * y2
		a03 += x0 * y3
		a10 += x1 * y0
		a11 += x1 * y1
		a12 += x1 * y2
		a13 += x1 * y3
	}
	return
}

// qsaDot2x1 is qsaDot2x4 for one key; each sum runs in the same order, so a score does not
// depend on whether its key fell in a group of four.
func qsaDot2x1(q0, q1, k0 []float32) (a0, a1 float32) {
	q1 = q1[:len(q0)]
	k0 = k0[:len(q0)]
	for i := range q0 {
		y := k0[i]
		a0 += q0[i] * y
		a1 += q1[i] * y
	}
	return
}
