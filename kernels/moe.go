package kernels

import (
	"github.com/stratakernels/strata/op"

	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/internal/blas"
)

// topKRoute is the MoE router after the logits GEMM: p = softmax(logits) over all E experts
// (max-subtracted, exp and sum in float64, p rounded to float32), then the K largest p per
// token in descending order, ties going to the lower expert index (torch.topk leaves tie order
// unspecified; this is the rule strata fixes). With norm (norm_topk_prob), w = p / sum of the
// K selected p; else w = p. logits: [T, E]; w, idx: [T, K] (slot order = rank).
// Source: Qwen3NextTopKRouter / Qwen4ExpTextTopKRouter. Parallel over tokens.
// Errors wrap op.ErrShape, or op.ErrInvalidArgument for K outside [1, E] or a NaN/Inf logit.
func topKRoute(w []float32, idx []int32, logits []float32, T, E, K int, norm bool) error {
	return execTopKRoute(op.TopKRoute{W: op.HostF32(w), Idx: op.HostI32(idx), Logits: op.HostF32(logits), T: T, E: E, K: K, Norm: norm})
}

func execTopKRoute(a op.TopKRoute) error {
	if err := a.Check(); err != nil {
		return err
	}
	w, idx, logits := a.W.F32(), a.Idx.I32(), a.Logits.F32()
	T, E, K, norm := a.T, a.E, a.K, a.Norm
	if err := a.CheckLogits(logits); err != nil {
		return err
	}
	parallelFor(T, 16, func(lo, hi int) {
		p := make([]float32, E)
		for t := lo; t < hi; t++ {
			moeSoftmaxRow(p, logits[t*E:(t+1)*E])
			wt, it := w[t*K:(t+1)*K], idx[t*K:(t+1)*K]
			n := 0 // filled slots, kept sorted: larger p first, equal p by lower index
			for e, v := range p {
				if n == K && !(v > wt[K-1]) {
					continue
				}
				pos := min(n, K-1)
				for pos > 0 && v > wt[pos-1] {
					pos--
				}
				end := min(n, K-1)
				copy(wt[pos+1:end+1], wt[pos:end])
				copy(it[pos+1:end+1], it[pos:end])
				wt[pos], it[pos] = v, int32(e)
				n = min(n+1, K)
			}
			if norm {
				var s float64
				for _, v := range wt {
					s += float64(v)
				}
				for j, v := range wt {
					wt[j] = float32(float64(v) / s)
				}
			}
		}
	})
	return nil
}

// moeSoftmaxRow writes p = softmax(x) for one row.
func moeSoftmaxRow(p, x []float32) {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	e := make([]float64, len(x))
	for i, v := range x {
		e[i] = math.Exp(float64(v) - float64(m))
		s += e[i]
	}
	for i := range p {
		p[i] = float32(e[i] / s)
	}
}

// moeExperts runs the routed experts without their routing weights. Slots (t, j) are grouped
// by expert (expert order, then token order), each expert runs as two GEMMs over its rows:
// h = silu(x Wg^T) * (x Wu^T), out = h Wd^T (SwiGLU). The unweighted output of slot (t, j)
// lands in row rk[t*K+j] of ye; rows are contiguous per expert. idx[t*K+j] = -1 marks an
// empty slot: it gets rk = -1 and no row; the unused tail rows of ye are zeroed.
// x: [T, D]; idx, rk: [T, K]; ye: [T*K, D]. MoECombine (or GRApplyMoEC) applies the weights.
// Source: Qwen3NextExperts / Qwen4ExpTextExperts (the combine is moe_comb).
// Errors wrap op.ErrShape, op.ErrInvalidArgument (expert index outside [-1, E)) or op.ErrDType.
func moeExperts(ye []float32, rk []int32, x []float32, T int, idx []int32, K int, ex *op.Experts) error {
	return execMoEExperts(op.MoEExperts{YE: op.HostF32(ye), RK: op.HostI32(rk), X: op.HostF32(x), Idx: op.HostI32(idx), T: T, K: K, Ex: ex})
}

func execMoEExperts(a op.MoEExperts) error {
	if err := a.Check(); err != nil {
		return err
	}
	ye, rk, x, idx := a.YE.F32(), a.RK.I32(), a.X.F32(), a.Idx.I32()
	K, ex := a.K, a.Ex
	if err := a.CheckIdx(idx); err != nil {
		return err
	}
	D, I := ex.D, ex.I
	count := make([]int, ex.E+1)
	for _, e := range idx {
		if e >= 0 {
			count[e+1]++
		}
	}
	maxRows := 0
	for e := 1; e <= ex.E; e++ {
		maxRows = max(maxRows, count[e])
		count[e] += count[e-1] // count[e] is now expert e's first row
	}
	used := count[ex.E]
	next := append([]int(nil), count[:ex.E]...)
	slots := make([]int32, used) // row -> slot, to gather x
	for i, e := range idx {
		if e < 0 {
			rk[i] = -1
			continue
		}
		r := next[e]
		next[e]++
		rk[i] = int32(r)
		slots[r] = int32(i)
	}
	clear(ye[used*D:])
	// op.Experts with rows, largest first (ties by index) so the dynamic schedule ends evenly; the
	// order only decides who runs an expert, never its bits.
	var order []int
	for e := 0; e < ex.E; e++ {
		if count[e+1] > count[e] {
			order = append(order, e)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		return count[order[i]+1]-count[order[i]] > count[order[j]+1]-count[order[j]]
	})
	// One expert per goroutine, each running its GEMMs single-threaded, when there are enough
	// experts to fill the cores; else experts one at a time, each GEMM parallel inside. The
	// GEMM blocks, and so the bits, are the same either way.
	workers := 1
	if blas.Concurrent() || allCompute(ex) {
		workers = min(runtime.GOMAXPROCS(0), len(order))
	}
	perExpert := workers > 1 && len(order) >= 2*workers
	if !perExpert {
		workers = 1
	}
	run := func(e int, xg, gu, h []float32) error {
		r0, n := count[e], count[e+1]-count[e]
		for r := 0; r < n; r++ {
			t := int(slots[r0+r]) / K
			copy(xg[r*D:(r+1)*D], x[t*D:(t+1)*D])
		}
		if g := computeOf(ex.GateUp[e]); ex.Split() && g != nil && computeOf(ex.Up[e]) != nil && computeOf(ex.Up[e]).mode == g.mode {
			// gate and up of one quantization of the rows (the bits of two separate products)
			if err := matMulCompute([][]float32{gu[:n*2*I], gu[I : n*2*I]}, 2*I, xg[:n*D], n, []*op.Matrix{ex.GateUp[e], ex.Up[e]}, !perExpert); err != nil {
				return fmt.Errorf("expert %d gate and up: %w", e, err)
			}
		} else if err := matMul(gu[:n*2*I], 2*I, xg[:n*D], n, ex.GateUp[e], !perExpert); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		} else if ex.Split() {
			// gate columns [0, I) written above, up columns [I, 2I) beside them
			if err := matMul(gu[I:n*2*I], 2*I, xg[:n*D], n, ex.Up[e], !perExpert); err != nil {
				return fmt.Errorf("expert %d up: %w", e, err)
			}
		}
		if perExpert {
			swigluRange(h, gu, 0, n, I)
		} else {
			swigluRows(h[:n*I], gu[:n*2*I], n, I)
		}
		if err := matMul(ye[r0*D:(r0+n)*D], D, h[:n*I], n, ex.Down[e], !perExpert); err != nil {
			return fmt.Errorf("expert %d: %w", e, err)
		}
		return nil
	}
	var taken atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			xg := make([]float32, maxRows*D)
			gu := make([]float32, maxRows*2*I)
			h := make([]float32, maxRows*I)
			for {
				i := int(taken.Add(1) - 1)
				if i >= len(order) {
					return
				}
				if err := run(order[i], xg, gu, h); err != nil && errs[g] == nil {
					errs[g] = err
				}
			}
		}(g)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// allCompute reports whether every product of the experts runs through a compute form (qdot's
// kernels run concurrently whatever the BLAS).
func allCompute(ex *op.Experts) bool {
	for e := range ex.E {
		if computeOf(ex.GateUp[e]) == nil || computeOf(ex.Down[e]) == nil || ex.Split() && computeOf(ex.Up[e]) == nil {
			return false
		}
	}
	return true
}

// swigluRows writes h[r, i] = silu(gu[r, i]) * gu[r, I+i] for rows r of gu [rows, 2I].
func swigluRows(h, gu []float32, rows, I int) {
	parallelFor(rows, max(1, 8192/I), func(lo, hi int) { swigluRange(h, gu, lo, hi, I) })
}

// swigluRange is swigluRows for rows lo..hi-1 on the calling goroutine.
func swigluRange(h, gu []float32, lo, hi, I int) {
	for r := lo; r < hi; r++ {
		g, u, o := gu[r*2*I:r*2*I+I], gu[r*2*I+I:(r+1)*2*I], h[r*I:(r+1)*I]
		swigluRow(o, g, u)
	}
}

// swiGLU writes h = silu(gu[:, :I]) * gu[:, I:] for gu [rows, 2I] (gate columns first, as the
// fused gate_up projection produces them) into h [rows, I]. Errors wrap op.ErrShape.
func swiGLU(h, gu []float32, rows, I int) error {
	return execSwiGLU(op.SwiGLU{H: op.HostF32(h), GU: op.HostF32(gu), Rows: rows, I: I})
}

func execSwiGLU(a op.SwiGLU) error {
	if err := a.Check(); err != nil {
		return err
	}
	h, gu, rows, I := a.H.F32(), a.GU.F32(), a.Rows, a.I
	if op.Present(a.U) {
		u := a.U.F32()
		parallelFor(rows, max(1, 8192/I), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				swigluRow(h[r*I:(r+1)*I], gu[r*I:(r+1)*I], u[r*I:(r+1)*I])
			}
		})
		return nil
	}
	swigluRows(h, gu, rows, I)
	return nil
}

// moeCheckCombine validates the slot table of a combine: ye [rows, D], rk and w [T, K], every
// rk in [-1, rows).

// moeCombineRow writes dst = sum over slots j in order of w[j] * ye[rk[j]] (float32
// accumulation from zero; empty slots skipped). Every combine goes through here, so fused and
// unfused variants agree bitwise.
func moeCombineRow(dst, ye []float32, rk []int32, w []float32) {
	D := len(dst)
	clear(dst)
	for j, r := range rk {
		if r < 0 {
			continue
		}
		wj, src := w[j], ye[int(r)*D:int(r+1)*D]
		for d, v := range src {
			dst[d] += wj * v
		}
	}
}

// moeCombine is moe_comb: out[t] = sum over slots j (in slot order) of w[t*K+j] * ye[rk[t*K+j]],
// skipping slots with rk = -1. ye: [rows, D]; rk, w: [T, K]; out: [T, D]. float32 accumulation.
// Parallel over tokens. Errors wrap op.ErrShape, or op.ErrInvalidArgument for rk outside [-1, rows).
func moeCombine(out, ye []float32, rows int, rk []int32, w []float32, T, K, D int) error {
	a := op.MoECombine{Out: op.HostF32(out), YE: op.HostF32(ye), RK: op.HostI32(rk), W: op.HostF32(w), T: T, K: K, D: D}
	if err := a.Check(); err != nil {
		return err
	}
	if rows < 0 || len(ye) != rows*D {
		return fmt.Errorf("MoECombine: %w: rows=%d D=%d len(ye)=%d", op.ErrShape, rows, D, len(ye))
	}
	return execMoECombine(a)
}

func execMoECombine(a op.MoECombine) error {
	if err := a.Check(); err != nil {
		return err
	}
	out, ye, rk, w := a.Out.F32(), a.YE.F32(), a.RK.I32(), a.W.F32()
	T, K, D := a.T, a.K, a.D
	if err := a.CheckSlots(rk); err != nil {
		return err
	}
	parallelFor(T, max(1, 4096/D), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			moeCombineRow(out[t*D:(t+1)*D], ye, rk[t*K:(t+1)*K], w[t*K:(t+1)*K])
		}
	})
	return nil
}

// sharedExpert is the always-on expert of a MoE block: Gate, Up [I, D] (shared_expert.gate_proj,
// up_proj), Down [D, I] (down_proj) and the scalar gate vector GateW [D]
// (shared_expert_gate.weight, one row); GateW nil means ungated.
type sharedExpert struct {
	D, I           int
	Gate, Up, Down *op.Matrix
	GateW          []float32
}

// sharedExpertMLP computes y = sigmoid(x . GateW) * Down(silu(Gate x) * Up x) for x, y [T, D]
// (the shared expert and its gate in Qwen3NextSparseMoeBlock / Qwen4ExpTextSparseMoeBlock; the
// gate dot runs in float64). y must not alias x. Errors wrap op.ErrShape, op.ErrInvalidArgument or op.ErrDType.
func sharedExpertMLP(y, x []float32, T int, se *sharedExpert) error {
	if se == nil {
		return fmt.Errorf("SharedExpertMLP: %w: nil shared expert", op.ErrInvalidArgument)
	}
	D, I := se.D, se.I
	for _, m := range []*op.Matrix{se.Gate, se.Up, se.Down} {
		if err := m.Validate("SharedExpertMLP"); err != nil {
			return err
		}
	}
	if D <= 0 || I <= 0 || se.Gate.N != I || se.Gate.K != D || se.Up.N != I || se.Up.K != D ||
		se.Down.N != D || se.Down.K != I || (se.GateW != nil && len(se.GateW) != D) {
		return fmt.Errorf("SharedExpertMLP: %w: D=%d I=%d gate [%d, %d] up [%d, %d] down [%d, %d] len(GateW)=%d",
			op.ErrShape, D, I, se.Gate.N, se.Gate.K, se.Up.N, se.Up.K, se.Down.N, se.Down.K, len(se.GateW))
	}
	if T < 0 || len(x) != T*D || len(y) != T*D {
		return fmt.Errorf("SharedExpertMLP: %w: T=%d D=%d len(x)=%d len(y)=%d", op.ErrShape, T, D, len(x), len(y))
	}
	g := make([]float32, T*I)
	u := make([]float32, T*I)
	if err := matMulChecked(g, x, T, se.Gate); err != nil {
		return err
	}
	if err := matMulChecked(u, x, T, se.Up); err != nil {
		return err
	}
	parallelFor(T*I, 4096, func(lo, hi int) { swigluRow(g[lo:hi], g[lo:hi], u[lo:hi]) })
	if err := matMulChecked(y, g, T, se.Down); err != nil {
		return err
	}
	if se.GateW == nil {
		return nil
	}
	parallelFor(T, max(1, 4096/D), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			var s float64
			for d, v := range x[t*D : (t+1)*D] {
				s += float64(v) * float64(se.GateW[d])
			}
			sg := sigmoid32(float32(s))
			for d := range y[t*D : (t+1)*D] {
				y[t*D+d] *= sg
			}
		}
	})
	return nil
}
