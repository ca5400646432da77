package kernels

import (
	"github.com/stratakernels/strata/internal/mem"
	"github.com/stratakernels/strata/op"

	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/internal/qdot"
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
//
// Schedule: the products of all experts are cut into tiles (an expert's row block times a
// column block of one weight) that every core takes from one shared list, largest blocks first,
// a block's down tiles at least twice as many tiles as cores after its gate and up tiles, the
// last of which runs the block's SwiGLU (moeSchedule). The tiles are the column blocks MatMul
// itself uses (gemmBlockRows; for the compute modes as few 32-column panels as keep the
// cores busy, the gate and up products of a block in one tile), and the rows of an
// expert are cut only where a row's bits do not depend on the rows around it (strata's SGEMM,
// the int8 and bf16 kernels; never a native BLAS), so every element is summed as in one MatMul
// of the expert's rows: the results are bitwise the same for every core count and schedule.
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
	return moeRun(ye, rk, x, idx, K, ex, runtime.GOMAXPROCS(0), max(1, moeWaveBytes/(3*4*ex.I)))
}

// moeRun is MoEExperts after validation with its tiles over up to workers goroutines (the
// rows of an expert are cut for that many cores) and waves of up to waveRows rows (one expert
// at least); the bits are the same for every count and wave size.
func moeRun(ye []float32, rk []int32, x []float32, idx []int32, K int, ex *op.Experts, workers, waveRows int) error {
	D, workers := ex.D, max(1, workers)
	count := make([]int, ex.E+1)
	for _, e := range idx {
		if e >= 0 {
			count[e+1]++
		}
	}
	for e := 1; e <= ex.E; e++ {
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
	s := &moeSchedule{ex: ex, x: x, ye: ye, slots: slots, K: K, first: count,
		workers: workers, waveRows: waveRows, rowsFree: !blas.Native() || allCompute(ex), concurrent: blas.Concurrent()}
	return s.run()
}

// The tiles of the routed experts (moeSchedule).
const (
	// moeWaveBytes bounds the gate/up and SwiGLU buffers (3 I float32 a row): the experts run
	// in waves of consecutive experts whose rows fit (one expert at least), so the buffers do
	// not grow with T.
	moeWaveBytes = 64 << 20
	// moeTilesPerWorker: the rows of an expert are cut into blocks only while a phase would
	// have fewer tiles than this many per core, enough for the dynamic schedule to end evenly.
	// Each cut repacks the weight block once more, so the rows stay whole where they can.
	moeTilesPerWorker = 8
	// moeMinRows is the smallest row block: a multiple of the SGEMM's six-row register tile
	// with enough rows to amortise packing the weight block.
	moeMinRows = 48
	// moePanel is the column granularity of an int8 or bf16 tile (qdot's panels).
	moePanel = 32
)

// moeSchedule runs the experts' products as tiles over the cores (moeExperts).
type moeSchedule struct {
	ex         *op.Experts
	x, ye      []float32
	slots      []int32 // grouped row -> slot t*K + j
	K          int
	first      []int // first[e]: expert e's first grouped row; first[E]: the rows in use
	workers    int
	waveRows   int
	rowsFree   bool // a row's bits do not depend on the rows multiplied with it
	concurrent bool // the BLAS may be entered from every core at once
	// cranges: the column ranges an int8 or bf16 product is cut into in this wave (each
	// call of those kernels has a setup per row, so the ranges are as wide as the cores allow).
	cranges int
}

// moeBlock is rows [r0, r1) (grouped rows, one expert's) of a wave.
type moeBlock struct{ e, r0, r1 int }

// moeTile is a column block [c0, c1) of weight w for the rows of block blk; its output starts
// at column off of the row (the up product beside the gate product), off -1 marking a down
// tile. up, when set, is the up
// weight of a split expert in the same compute mode as w (the gate): the tile runs its same
// columns too, at column off + I, from the same quantized rows.
type moeTile struct {
	blk, c0, c1, off int
	w, up            *op.Matrix
}

// colTiles appends the column blocks of w for block blk.
func (s *moeSchedule) colTiles(tiles []moeTile, blk int, w, up *op.Matrix, off int) []moeTile {
	nb := gemmBlockRows(w.N, w.K)
	if computeOf(w) != nil {
		nb = ((w.N+s.cranges-1)/s.cranges + moePanel - 1) / moePanel * moePanel
	}
	for c0 := 0; c0 < w.N; c0 += nb {
		tiles = append(tiles, moeTile{blk: blk, c0: c0, c1: min(c0+nb, w.N), off: off, w: w, up: up})
	}
	return tiles
}

func (s *moeSchedule) run() error {
	E := s.ex.E
	var waves [][2]int
	most := 0 // rows of the largest wave
	for e0 := 0; e0 < E; {
		e1 := e0 + 1
		for e1 < E && s.first[e1+1]-s.first[e0] <= s.waveRows {
			e1++
		}
		waves = append(waves, [2]int{e0, e1})
		most = max(most, s.first[e1]-s.first[e0])
		e0 = e1
	}
	// One buffer for all waves, of the largest's size, taken from a pool, not fresh memory:
	// every element is written before it is read, and first touches of fresh pages (tens of
	// MiB a wave) cost as much as the SwiGLU.
	buf := poolF32(&moeBufs, most*3*s.ex.I)
	defer moeBufs.Put(buf)
	for _, w := range waves {
		if err := s.wave(w[0], w[1], *buf); err != nil {
			return err
		}
	}
	return nil
}

// wave runs experts [e0, e1): gate and up tiles (the last tile of a block runs its SwiGLU)
// and down tiles in one list over the cores, their gate/up and SwiGLU values in buf (at least
// 3 I float32 a row of the wave).
func (s *moeSchedule) wave(e0, e1 int, buf []float32) error {
	ex, I, D := s.ex, s.ex.I, s.ex.D
	w0 := s.first[e0]
	n := s.first[e1] - w0
	if n == 0 {
		return nil
	}
	active, split, want := 0, 1, moeTilesPerWorker*s.workers
	for e := e0; e < e1; e++ {
		if s.first[e+1] > s.first[e] {
			active++
		}
	}
	s.cranges = (want + active - 1) / active
	var perA, perB int // tiles of an uncut expert in each phase
	for e := e0; e < e1; e++ {
		if s.first[e+1] > s.first[e] {
			perA = len(s.upTiles(nil, 0, e))
			perB = len(s.colTiles(nil, 0, ex.Down[e], nil, 0))
			break
		}
	}
	if s.rowsFree && active*min(perA, perB) < want {
		split = (want + active*min(perA, perB) - 1) / (active * min(perA, perB))
	}
	var blocks []moeBlock
	for e := e0; e < e1; e++ {
		r0, r1 := s.first[e], s.first[e+1]
		if r1 == r0 {
			continue
		}
		rb := r1 - r0
		if split > 1 {
			rb = max(moeMinRows, ((rb+split-1)/split+5)/6*6)
		}
		for r := r0; r < r1; r += rb {
			blocks = append(blocks, moeBlock{e: e, r0: r, r1: min(r+rb, r1)})
		}
	}
	// Blocks largest first (ties in expert and row order) so that the schedule ends evenly;
	// the order decides who runs a tile, never its bits. A block's tiles stay together so a
	// core often finds the block's rows already gathered.
	sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].r1-blocks[i].r0 > blocks[j].r1-blocks[j].r0 })
	tiles := s.list(blocks)
	gu, h := buf[:n*2*I], buf[n*2*I:n*3*I]
	left := make([]atomic.Int32, len(blocks))   // gate and up tiles of a block still to run
	ready := make([]chan struct{}, len(blocks)) // closed once a block's SwiGLU is done
	for b := range ready {
		ready[b] = make(chan struct{})
	}
	for _, t := range tiles {
		if t.off >= 0 {
			left[t.blk].Add(1)
		}
	}
	return s.tiles(tiles, func(wk *moeWorker, t moeTile) error {
		blk := blocks[t.blk]
		rows := blk.r1 - blk.r0
		if t.off < 0 {
			<-ready[t.blk]
			hb := h[(blk.r0-w0)*I : (blk.r1-w0)*I]
			if err := wk.product(s.ye[blk.r0*D:], D, hb, rows, 2*t.blk+1, t.w, t.c0, t.c1); err != nil {
				return fmt.Errorf("expert %d down: %w", blk.e, err)
			}
			return nil
		}
		if wk.gathered != t.blk {
			wk.gathered = t.blk
			if wk.xg == nil {
				wk.xg = poolF32(&gemmScratch, 0)
			}
			*wk.xg = slices.Grow((*wk.xg)[:0], rows*D)[:rows*D]
			for r := 0; r < rows; r++ {
				tk := int(s.slots[blk.r0+r]) / s.K
				copy((*wk.xg)[r*D:(r+1)*D], s.x[tk*D:(tk+1)*D])
			}
		}
		y := gu[(blk.r0-w0)*2*I+t.off:]
		err := wk.product(y, 2*I, *wk.xg, rows, 2*t.blk, t.w, t.c0, t.c1)
		if err == nil && t.up != nil {
			err = wk.product(y[I:], 2*I, *wk.xg, rows, 2*t.blk, t.up, t.c0, t.c1)
		}
		if left[t.blk].Add(-1) == 0 {
			swigluRange(h, gu, blk.r0-w0, blk.r1-w0, I)
			close(ready[t.blk])
		}
		if err != nil {
			return fmt.Errorf("expert %d: %w", blk.e, err)
		}
		return nil
	})
}

// list is a wave's tiles in the order the cores take them: each block's gate and up tiles,
// then, once at least twice as many tiles as workers follow a block's last gate/up tile, that
// block's down tiles (all that are left at the end of the list). The cores take the tiles in
// list order, so a block's last gate/up tile has run for about the time of the tiles between it
// and the block's first down tile, divided by the workers, and its SwiGLU is done but for a
// straggler (a down tile waits for it); closer, the down tiles of blocks whose gate and up
// tiles had only just started would park their cores (with a fixed two blocks between them, on
// 16 cores a down tile was taken about a fifth of a gate/up tile's time after its block's).
func (s *moeSchedule) list(blocks []moeBlock) []moeTile {
	var tiles []moeTile
	lastUp := make([]int, len(blocks))
	d := 0 // the next block whose down tiles are still to be listed
	for b, blk := range blocks {
		tiles = s.upTiles(tiles, b, blk.e)
		lastUp[b] = len(tiles) - 1
		for ; d < b && len(tiles)-1-lastUp[d] >= 2*s.workers; d++ {
			tiles = s.colTiles(tiles, d, s.ex.Down[blocks[d].e], nil, -1)
		}
	}
	for ; d < len(blocks); d++ {
		tiles = s.colTiles(tiles, d, s.ex.Down[blocks[d].e], nil, -1)
	}
	return tiles
}

// upTiles appends the gate and up tiles of expert e for block blk: the fused gate_up weight's
// column blocks; or the gate's and (at column I) the up weight's, in the same tiles when both
// run in one compute mode (one quantization of the rows for both, the fused pass over them).
func (s *moeSchedule) upTiles(tiles []moeTile, blk, e int) []moeTile {
	if !s.ex.Split() {
		return s.colTiles(tiles, blk, s.ex.GateUp[e], nil, 0)
	}
	g, u := computeOf(s.ex.GateUp[e]), computeOf(s.ex.Up[e])
	if g != nil && u != nil && g.mode == u.mode {
		return s.colTiles(tiles, blk, s.ex.GateUp[e], s.ex.Up[e], 0)
	}
	tiles = s.colTiles(tiles, blk, s.ex.GateUp[e], nil, 0)
	return s.colTiles(tiles, blk, s.ex.Up[e], nil, s.ex.I)
}

// tiles runs fn on every tile over up to s.workers goroutines, taken in order from a shared
// counter.
func (s *moeSchedule) tiles(tiles []moeTile, fn func(*moeWorker, moeTile) error) error {
	return overTiles(s.workers, len(tiles), func() (func(int) error, func()) {
		wk := &moeWorker{s: s, gathered: -1, actBlk: -1}
		return func(i int) error { return fn(wk, tiles[i]) }, wk.release
	})
}

// moeBufs holds the gate/up and SwiGLU buffers of a wave (poolF32).
var moeBufs = sync.Pool{New: func() any { s := make([]float32, 0); return &s }}

// poolF32 takes a buffer of at least n values from p, its length its capacity and its
// contents stale; Put it back when done.
func poolF32(p *sync.Pool, n int) *[]float32 {
	b := p.Get().(*[]float32)
	if cap(*b) < n {
		*b = mem.F32(n)
	}
	*b = (*b)[:cap(*b)]
	return b
}

// moeWorker is one goroutine's scratch: the gathered rows of its last block, the quantized
// (int8) or rounded (bf16) form of its last product's rows, and the widening scratch of f32
// blocks.
type moeWorker struct {
	s        *moeSchedule
	gathered int // block whose rows xg holds, -1 for none
	xg       *[]float32
	// actBlk, actMode: the rows (2 blk for a block's gathered inputs, 2 blk + 1 for its SwiGLU
	// output) and mode the activation below was made for.
	actBlk  int
	actMode op.ComputeMode
	i8      *qdot.Int8Act
	b16     *qdot.BF16Act
	scratch *[]float32
}

// product runs columns [c0, c1) of x [rows, K] (the rows named key, as actBlk) times w^T into
// y (row r at y[r*ldy:], column c at y[c]); x is quantized or rounded once per key and mode.
func (wk *moeWorker) product(y []float32, ldy int, x []float32, rows, key int, w *op.Matrix, c0, c1 int) error {
	f := computeOf(w)
	if f == nil {
		if wk.scratch == nil {
			wk.scratch = poolF32(&gemmScratch, 0)
		}
		if need := matMulScratch(w); cap(*wk.scratch) < need {
			*wk.scratch = make([]float32, need)
		}
		return matMulBlock(y, ldy, x[:rows*w.K], rows, w, c0/gemmBlockRows(w.N, w.K), (*wk.scratch)[:cap(*wk.scratch)], wk.s.concurrent)
	}
	fresh := wk.actBlk != key || wk.actMode != f.mode
	wk.actBlk, wk.actMode = key, f.mode
	wrap := func(err error) error {
		return fmt.Errorf("cpu: %w: %s product of [%d, %d] by %s [%d, %d]: %v", op.ErrShape, f.mode, rows, w.K, f.what, w.N, w.K, err)
	}
	if f.mode == op.ComputeInt8 {
		if wk.i8 == nil {
			wk.i8 = int8ActPool.Get().(*qdot.Int8Act)
		}
		if fresh {
			if err := qdot.QuantizeInt8(wk.i8, x[:rows*w.K], rows, w.K, int8Block); err != nil {
				wk.actBlk = -1
				return wrap(err)
			}
		}
		if err := qdot.MatMulInt8(y[c0:], ldy, wk.i8, f.i8, c0, c1, f.k); err != nil {
			return wrap(err)
		}
		return nil
	}
	if wk.b16 == nil {
		wk.b16 = bf16ActPool.Get().(*qdot.BF16Act)
	}
	if fresh {
		if err := qdot.RoundBF16(wk.b16, x[:rows*w.K], rows, w.K); err != nil {
			wk.actBlk = -1
			return wrap(err)
		}
	}
	if err := qdot.MatMulBF16(y[c0:], ldy, wk.b16, f.b16, c0, c1, f.k); err != nil {
		return wrap(err)
	}
	return nil
}

// release returns the worker's activation buffers to their pools.
func (wk *moeWorker) release() {
	for _, p := range []*[]float32{wk.xg, wk.scratch} {
		if p != nil {
			gemmScratch.Put(p)
		}
	}
	if wk.i8 != nil {
		int8ActPool.Put(wk.i8)
	}
	if wk.b16 != nil {
		bf16ActPool.Put(wk.b16)
	}
}

// allCompute reports whether every product of the experts runs through a compute form (whose
// rows' bits do not depend on the rows around them).
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
// accumulation from zero, each product and sum rounded; empty slots skipped). Every combine goes
// through here, so fused and unfused variants agree bitwise.
func moeCombineRow(dst, ye []float32, rk []int32, w []float32) {
	D := len(dst)
	clear(dst)
	for j, r := range rk {
		if r < 0 {
			continue
		}
		axpy(dst, ye[int(r)*D:int(r+1)*D], w[j])
	}
}

// axpy sets dst[i] = dst[i] + w*src[i] for i < len(dst), the product and the sum each rounded to
// float32 (no fused multiply-add, so that the assembly and every compiler give the same bits).
func axpy(dst, src []float32, w float32) {
	src = src[:len(dst)]
	n8 := 0
	if useAsmVec() {
		if n8 = len(dst) &^ 7; n8 > 0 {
			axpy8(&dst[0], &src[0], n8, w)
		}
	}
	for i := n8; i < len(dst); i++ {
		dst[i] += float32(w * src[i])
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
