package kernels

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/stratakernels/strata/internal/blas"
	"github.com/stratakernels/strata/internal/cputime"
	"github.com/stratakernels/strata/internal/mem"
	"github.com/stratakernels/strata/op"
)

// Backend is the CPU implementation of op.Backend: tensors are Go memory (op.Host), weights are
// used in place (memory-mapped 16-bit or float32), and a Pass runs each op at once on the calling
// goroutine (the ops spread their own work over GOMAXPROCS goroutines). The zero value is ready.
type Backend struct{}

var _ op.Backend = Backend{}

// Name implements op.Backend.
func (Backend) Name() string { return "cpu" }

// Kernels implements op.Backend: the instruction sets of the attention, GDN, activation, MLX
// and GGML dequantization kernels and the BLAS behind GEMM.
func (Backend) Kernels() string {
	return fmt.Sprintf("cpu (GOMAXPROCS=%d): attention %s, GDN %s, activations %s, MLX dequantization %s, GGML dequantization %s; GEMM %s",
		runtime.GOMAXPROCS(0), AttentionKernel(), GDNKernel(), ActKernel(), QuantKernel(), GGMLKernel(), blas.Impl())
}

// NewTensor implements op.Backend.
func (Backend) NewTensor(dt op.DType, n int) (op.Tensor, error) {
	if n < 0 || n > op.MaxElems {
		return nil, fmt.Errorf("cpu: %w: tensor of %d elements", op.ErrShape, n)
	}
	switch dt {
	case op.F32:
		return op.HostF32(mem.F32(n)), nil
	case op.I32:
		return op.HostI32(make([]int32, n)), nil
	}
	return nil, fmt.Errorf("cpu: %w: tensor of %v", op.ErrDType, dt)
}

// Free implements op.Backend (Go memory is collected).
func (Backend) Free(op.Tensor) {}

// NewWeights implements op.Backend: weights are read in place, or as the float32 copies
// Weights.Prepare makes within o.WidenBudget, or (o.Compute int8 or bf16) through the compute
// forms Prepare makes (compute.go). A compute mode outside op.ComputeModes runs as f32 and
// Weights.Compute names it (strata.LoadModel refuses it before it gets here).
func (Backend) NewWeights(o op.WeightOptions) op.Weights {
	w := &hostWeights{budget: o.WidenBudget}
	if o.Compute.Valid() != nil {
		w.bad = o.Compute
		o.Compute = op.ComputeF32
	}
	w.c = newComputeState(o.Compute)
	return w
}

// NewScratch implements op.Backend.
func (Backend) NewScratch() op.Scratch { return &scratch{m: map[string]*op.Host{}} }

// Begin implements op.Backend.
func (Backend) Begin(w op.Weights, s op.Scratch) (op.Pass, error) {
	return &pass{}, nil
}

// Variants implements op.Backend: the CPU has one kernel set per op (Kernels names it).
func (Backend) Variants() []string { return nil }

// hostWeights is the CPU weight store: nothing is uploaded; Prepare widens 16-bit matrices to
// float32 copies while they fit the budget (bf16 widened per call costs MatMul about a
// twentieth of the product at 80 rows per block, BENCHMARKS.md).
type hostWeights struct {
	mu     sync.Mutex
	budget int64 // bytes of float32 copies allowed; negative: no limit
	bytes  int64 // bytes of float32 copies made
	c      *computeState
	bad    op.ComputeMode // a mode outside op.ComputeModes asked for (run as f32)
}

// Prepare implements op.Weights. In a compute mode (int8, bf16) a matrix whose format the mode
// takes comes back as a copy of m carrying its compute form (op.Matrix.Compute: the int8 or bf16
// operand, which reads m's data as stored). Otherwise: a float32 copy of a BF16 or F16 matrix while the
// copies made so far plus this one stay within the budget, else m.
func (w *hostWeights) Prepare(m *op.Matrix) (*op.Matrix, error) {
	if err := m.Validate("Weights.Prepare"); err != nil {
		return nil, err
	}
	if w.c.mode != op.ComputeF32 {
		f, why, err := w.c.form(m)
		if err != nil {
			return nil, err
		}
		if f != nil {
			w.c.note(f.String())
			cp := *m
			cp.Compute = f
			return &cp, nil
		}
		w.c.note(fmt.Sprintf("f32 for %s (%s)", weightFormat(m), why))
	}
	if m.DType != op.BF16 && m.DType != op.F16 {
		return m, nil // float32 already, or quantized (kept packed: dequantized inside the GEMMs)
	}
	size := 4 * int64(m.N) * int64(m.K)
	w.mu.Lock()
	if w.budget >= 0 && w.bytes+size > w.budget {
		w.mu.Unlock()
		return m, nil
	}
	w.bytes += size
	w.mu.Unlock()
	return widenF32(m)
}

// Bytes implements op.Weights: the float32 copies made at load (the compute modes make none;
// the GGML 4-bit weights int8 packs at load are its forms' Bytes).
func (w *hostWeights) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// Compute implements op.Weights (computeState.report).
func (w *hostWeights) Compute() string {
	if w.bad != op.ComputeF32 {
		return fmt.Sprintf("f32 (%v is no compute mode)", w.bad)
	}
	return w.c.report()
}

func (w *hostWeights) Release() {}

// scratch keeps named host tensors; a tensor is reallocated only when a call needs more.
type scratch struct {
	mu sync.Mutex
	m  map[string]*op.Host
}

func (s *scratch) Tensor(name string, dt op.DType, n int) (op.Tensor, error) {
	if n < 0 || n > op.MaxElems {
		return nil, fmt.Errorf("cpu: %w: scratch %s of %d elements", op.ErrShape, name, n)
	}
	if dt != op.F32 && dt != op.I32 {
		return nil, fmt.Errorf("cpu: %w: scratch %s of %v", op.ErrDType, name, dt)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.m[name]; ok && t.DType() == dt && t.Len() >= n {
		return t.Slice(0, n), nil
	}
	var t *op.Host
	if dt == op.F32 {
		t = op.HostF32(mem.F32(n))
	} else {
		t = op.HostI32(make([]int32, n))
	}
	s.m[name] = t
	return t, nil
}

func (s *scratch) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, t := range s.m {
		n += 4 * int64(t.Len())
	}
	return n
}

func (s *scratch) Release() {
	s.mu.Lock()
	clear(s.m)
	s.mu.Unlock()
}

// pass runs each op at once and times it under the current stage: wall time, and the
// process's CPU time where the system gives it (cputime.Process).
type pass struct {
	stage          int
	times, cpu, sy []time.Duration
}

func (p *pass) Stage(stage int) { p.stage = stage }

// run times one op under the current stage.
func (p *pass) run(fn func() error) error {
	t0 := time.Now()
	u0, s0, ok := cputime.Process()
	err := fn()
	u1, s1, ok1 := cputime.Process()
	d := time.Since(t0)
	if p.stage >= 0 && p.stage < 64 {
		addAt(&p.times, p.stage, d)
		if ok && ok1 {
			addAt(&p.cpu, p.stage, u1-u0+s1-s0)
			addAt(&p.sy, p.stage, s1-s0)
		}
	}
	return err
}

// addAt adds d to (*s)[i], growing *s with zeros to hold it.
func addAt(s *[]time.Duration, i int, d time.Duration) {
	if n := len(*s); n <= i {
		*s = append(*s, make([]time.Duration, i+1-n)...)
	}
	(*s)[i] += d
}

func (p *pass) Commit() (op.Timing, error) {
	var total time.Duration
	for _, d := range p.times {
		total += d
	}
	return op.Timing{Stage: p.times, PerStage: true, Total: total, CPU: p.cpu, Sys: p.sy}, nil
}

func (p *pass) Abandon() {}

func (p *pass) MatMul(a op.MatMul) error     { return p.run(func() error { return execMatMul(a) }) }
func (p *pass) RMSNorm(a op.RMSNorm) error   { return p.run(func() error { return execRMSNorm(a) }) }
func (p *pass) GRRead(a op.GRRead) error     { return p.run(func() error { return execGRRead(a) }) }
func (p *pass) GRWrite(a op.GRWrite) error   { return p.run(func() error { return execGRWrite(a) }) }
func (p *pass) GDNPre(a op.GDNPre) error     { return p.run(func() error { return execGDNPre(a) }) }
func (p *pass) GDNScan(a op.GDNScan) error   { return p.run(func() error { return execGDNScan(a) }) }
func (p *pass) GDNPost(a op.GDNPost) error   { return p.run(func() error { return execGDNPost(a) }) }
func (p *pass) SwiGLU(a op.SwiGLU) error     { return p.run(func() error { return execSwiGLU(a) }) }
func (p *pass) PLEApply(a op.PLEApply) error { return p.run(func() error { return execPLEApply(a) }) }
func (p *pass) Attention(a op.Attention) error {
	return p.run(func() error { return execAttention(a) })
}
func (p *pass) SigmoidMul(a op.SigmoidMul) error {
	return p.run(func() error { return execSigmoidMul(a) })
}
func (p *pass) TopKRoute(a op.TopKRoute) error {
	return p.run(func() error { return execTopKRoute(a) })
}
func (p *pass) MoEExperts(a op.MoEExperts) error {
	return p.run(func() error { return execMoEExperts(a) })
}
func (p *pass) MoECombine(a op.MoECombine) error {
	return p.run(func() error { return execMoECombine(a) })
}
func (p *pass) GRApplyMoEC(a op.GRApplyMoEC) error {
	return p.run(func() error { return execGRApplyMoEC(a) })
}
func (p *pass) RowSigmoidScale(a op.RowSigmoidScale) error {
	return p.run(func() error { return execRowSigmoidScale(a) })
}
func (p *pass) Add(a op.Add) error         { return p.run(func() error { return execAdd(a) }) }
func (p *pass) Copy(a op.Copy) error       { return p.run(func() error { return execCopy(a) }) }
func (p *pass) Embed(a op.Embed) error     { return p.run(func() error { return execEmbed(a) }) }
func (p *pass) QSAPrep(a op.QSAPrep) error { return p.run(func() error { return execQSAPrep(a) }) }
func (p *pass) QSAIndex(a op.QSAIndex) error {
	return p.run(func() error { return execQSAIndex(a) })
}

// execAdd is H += U (+ V).
func execAdd(a op.Add) error {
	if err := a.Check(); err != nil {
		return err
	}
	H, u := a.H.F32(), a.U.F32()
	var v []float32
	if op.Present(a.V) {
		v = a.V.F32()
	}
	parallelFor(len(u), 1<<14, func(lo, hi int) {
		if v == nil {
			for i := lo; i < hi; i++ {
				H[i] += u[i]
			}
			return
		}
		for i := lo; i < hi; i++ {
			H[i] += u[i] + v[i]
		}
	})
	return nil
}

// execRowSigmoidScale is x[r, :] *= sigmoid(s[r]), the gate in float64.
func execRowSigmoidScale(a op.RowSigmoidScale) error {
	if err := a.Check(); err != nil {
		return err
	}
	x, s, D := a.X.F32(), a.S.F32(), a.D
	parallelFor(a.Rows, max(1, 4096/D), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			gv := float32(sigmoid64(float64(s[t])))
			for j := 0; j < D; j++ {
				x[t*D+j] *= gv
			}
		}
	})
	return nil
}

func execCopy(a op.Copy) error {
	if err := a.Check(); err != nil {
		return err
	}
	if a.Src.DType() == op.I32 {
		copy(a.Dst.I32(), a.Src.I32())
	} else {
		copy(a.Dst.F32(), a.Src.F32())
	}
	return nil
}

// execEmbed gathers table rows (widened exactly, or for the packed formats decoded: gather, then
// dequantize the gathered rows) into every stream of H.
func execEmbed(a op.Embed) error {
	if err := a.Check(); err != nil {
		return err
	}
	tok := a.Tokens.I32()
	if err := a.CheckTokens(tok); err != nil {
		return err
	}
	H, S, D := a.H.F32(), a.S, a.Table.K
	parallelFor(a.T, 16, func(lo, hi int) {
		sb := make([]float32, packedScratch(a.Table, 1))
		for t := lo; t < hi; t++ {
			row := H[t*S*D : t*S*D+D]
			rowF32(row, a.Table, int(tok[t]), sb)
			for s := 1; s < S; s++ {
				copy(H[(t*S+s)*D:(t*S+s+1)*D], row)
			}
		}
	})
	return nil
}

// execQSAPrep splits qg into query and gate, appends k and v to the cache rows pos0.., and
// normalises and rotates the queries and the new keys in place (RMSNorm1pRoPE).
func execQSAPrep(a op.QSAPrep) error {
	if err := a.Check(); err != nil {
		return err
	}
	T, Hq, Hkv, D, pos0 := a.T, a.Hq, a.Hkv, a.D, a.Pos0
	q, gate, qg := a.Q.F32(), a.Gate.F32(), a.QG.F32()
	kNew := a.KC.F32()[pos0*Hkv*D : (pos0+T)*Hkv*D]
	copy(kNew, a.K.F32())
	copy(a.VC.F32()[pos0*Hkv*D:(pos0+T)*Hkv*D], a.V.F32())
	parallelFor(T, 16, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < Hq; h++ {
				src := qg[(t*Hq+h)*2*D:]
				copy(q[(t*Hq+h)*D:(t*Hq+h+1)*D], src[:D])
				copy(gate[(t*Hq+h)*D:(t*Hq+h+1)*D], src[D:2*D])
			}
		}
	})
	if err := rmsNorm1pRoPE(q, T, Hq, D, a.QNorm, a.Eps, a.Rot, pos0, a.Theta); err != nil {
		return err
	}
	return rmsNorm1pRoPE(kNew, T, Hkv, D, a.KNorm, a.Eps, a.Rot, pos0, a.Theta)
}

// execQSAIndex splits iqk into the index queries and the raw keys (appended to the key cache),
// prepares the queries (RMSNorm1pRoPE) and runs the selection into the token tensor.
func execQSAIndex(a op.QSAIndex) error {
	if err := a.Check(); err != nil {
		return err
	}
	p := a.P
	nh, dh := p.NHeads, p.Dim
	iq, keys, iqk := a.IQ.F32(), a.Keys.F32(), a.IQK.F32()
	for t := 0; t < p.T; t++ {
		copy(iq[t*nh*dh:(t+1)*nh*dh], iqk[t*(nh+1)*dh:])
		copy(keys[(p.Pos0+t)*dh:(p.Pos0+t+1)*dh], iqk[(t*(nh+1)+nh)*dh:])
	}
	if err := rmsNorm1pRoPE(iq, p.T, nh, dh, a.QNorm, p.Eps, p.Rot, p.Pos0, p.Theta); err != nil {
		return err
	}
	tok := a.Tok.I32()
	sel := &op.Selection{Tokens: tok[:0:len(tok)]}
	return qsaSelect(sel, iq, keys, a.KNorm, p)
}
