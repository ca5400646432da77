package op

// QSALayout fills sel's row layout for p: T, Dense (a row is dense when its min(Budget/Ratio,
// nb) kept blocks are all its nb complete blocks) and Offsets, and sizes Tokens to the total
// selected-token count without filling it. It returns that total and the block count of the
// last sparse row (0 when every row is dense). The layout depends only on the positions, so
// every backend's indexer shares it. p must already be valid (IndexerParams.Check).
func QSALayout(sel *Selection, p IndexerParams) (total, nbLast int) {
	total, nbLast = qsaLayout(sel, p)
	sel.Tokens = grow(sel.Tokens, total)
	return total, nbLast
}

func qsaLayout(sel *Selection, p IndexerParams) (total, nbLast int) {
	keep := p.Budget / p.Ratio
	sel.T = p.T
	sel.Dense = grow(sel.Dense, p.T)
	sel.Offsets = grow(sel.Offsets, p.T+1)
	for t := 0; t < p.T; t++ {
		sel.Offsets[t] = int32(total)
		vis := p.Pos0 + t + 1
		nb := vis / p.Ratio
		sel.Dense[t] = nb <= keep
		if !sel.Dense[t] {
			total += keep*p.Ratio + vis - nb*p.Ratio
			nbLast = nb
		}
	}
	sel.Offsets[p.T] = int32(total)
	return total, nbLast
}

// QSAPlan is the layout of the selection of one indexer call (T, Dense, Offsets as QSALayout
// fills them) with no Tokens: in a Pass the tokens live in a tensor of Offsets[T] elements.
func QSAPlan(p IndexerParams) *Selection {
	s := &Selection{}
	qsaLayout(s, p)
	return s
}

func grow[E any](s []E, n int) []E {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]E, n)
}
