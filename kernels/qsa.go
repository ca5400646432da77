package kernels

import (
	"github.com/stratakernels/strata/op"

	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// qsaSelect runs the QSA indexer for a prefill chunk and writes, for each query row, the key
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
func qsaSelect(sel *op.Selection, q []float32, rawKeys []float32, kNorm []float32, p op.IndexerParams) error {
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
	keysT := qsaBlockKeys(rawKeys, kNorm, p, nbSparse)
	scale := float32(1 / math.Sqrt(float64(p.Dim)))
	// Dense rows form a prefix (a row is dense while its position is small); the sparse rows are
	// scored in tiles of qsaTileRows, handed out one at a time (later rows see more blocks).
	first := 0
	for first < p.T && sel.Dense[first] {
		first++
	}
	tiles := (p.T - first + qsaTileRows - 1) / qsaTileRows
	var next atomic.Int64
	parallelFor(tiles, 1, func(_, _ int) {
		var ws qsaWork
		for {
			i := int(next.Add(1)) - 1
			if i >= tiles {
				return
			}
			t0 := first + i*qsaTileRows
			t1 := min(t0+qsaTileRows, p.T)
			nbMax := (p.Pos0 + t1) / p.Ratio // blocks visible to the tile's last row
			sc := ws.scores(q[t0*p.NHeads*p.Dim:], keysT, nbSparse, t1-t0, nbMax, p.NHeads, p.Dim, scale)
			for t := t0; t < t1; t++ {
				pos := p.Pos0 + t
				nb := (pos + 1) / p.Ratio
				row := sc[(t-t0)*nbMax : (t-t0)*nbMax+nb]
				out := sel.Tokens[sel.Offsets[t]:sel.Offsets[t+1]]
				qsaEmit(out, row, ws.buf(nb), keep, p.Ratio, pos)
			}
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

// qsaBlockKeys returns the keys of blocks 0..nb-1 transposed, [Dim, nb] (the B operand of the
// score products): pooled mean, RMSNorm1p, RoPE at the block's first position, all in float64,
// rounded once.
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
			for j, v := range x {
				keys[j*nb+b] = float32(v)
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

// qsaTileRows is how many query rows the indexer scores at once, and qsaTileBlocks how many
// blocks: a [Dim, qsaTileBlocks] part of the transposed block keys (256 KB at Dim 128) stays in
// cache while every head of the tile's rows runs over it.
const (
	qsaTileRows   = 24
	qsaTileBlocks = 512
)

// qsaWork is one worker's scratch for the indexer scores, grown as needed.
type qsaWork struct {
	sc, part, sorted []float32
	rows             []*float32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// buf returns n floats of selection scratch.
func (w *qsaWork) buf(n int) []float32 {
	w.sorted = grow(w.sorted, n)
	return w.sorted
}

// scores returns sc [rows, nb]: sc[r, b] = scale * sum_h relu(q_{r,h} . key_b) for the rows
// query rows starting at q (row stride nh*dim) and blocks b < nb of keysT [dim, ldk] (the keys
// transposed, ldk >= nb); heads are
// added in index order, each dot product is one fmaGemm sum over dim in index order (so a score
// does not depend on the tile it fell in). NaN scores become -Inf so that they rank last.
func (w *qsaWork) scores(q, keysT []float32, ldk, rows, nb, nh, dim int, scale float32) []float32 {
	w.sc = grow(w.sc, rows*nb)
	clear(w.sc)
	if cap(w.rows) < dim {
		w.rows = make([]*float32, dim)
	}
	brows := w.rows[:dim]
	for b0 := 0; b0 < nb; b0 += qsaTileBlocks {
		nc := min(qsaTileBlocks, nb-b0)
		fmaRowTable(brows, keysT[b0:], ldk, nc)
		w.part = grow(w.part, rows*nc)
		for h := 0; h < nh; h++ {
			clear(w.part)
			fmaGemm(w.part, nc, q[h*dim:], nh*dim, 1, brows, rows, nc, dim)
			for r := 0; r < rows; r++ {
				dst, src := w.sc[r*nb+b0:r*nb+b0+nc], w.part[r*nc:(r+1)*nc]
				for b, v := range src {
					dst[b] += max(v, 0)
				}
			}
		}
	}
	negInf := float32(math.Inf(-1))
	for i, v := range w.sc {
		v *= scale
		if v != v {
			v = negInf
		}
		w.sc[i] = v
	}
	return w.sc
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
