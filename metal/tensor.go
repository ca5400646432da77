package metal

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Tensor is a range of 4-byte elements (float32 or int32) of a shared-storage device buffer: the
// activations, caches and states a prefill keeps on the device; it implements op.Tensor. F32 and
// I32 alias the buffer's memory (unified memory: no copy); read or write them only while no Pass
// that uses the tensor is in flight.
type Tensor struct {
	buf mtl.Buffer
	off int // bytes
	n   int // elements
	dt  op.DType
	own bool
	b   *Backend
}

var _ op.Tensor = (*Tensor)(nil)

// NewTensor implements op.Backend: a zeroed device tensor of n elements of dt (F32 or I32) in
// its own buffer (Free releases it). Errors wrap op.ErrShape (n outside [0, 2^31)), op.ErrDType
// or op.ErrOutOfMemory.
func (b *Backend) NewTensor(dt op.DType, n int) (op.Tensor, error) {
	return b.newTensor(dt, n)
}

func (b *Backend) newTensor(dt op.DType, n int) (*Tensor, error) {
	if err := guard32("NewTensor", n); err != nil {
		return nil, err
	}
	if dt != op.F32 && dt != op.I32 {
		return nil, fmt.Errorf("metal: %w: tensor of %v", op.ErrDType, dt)
	}
	buf, err := b.dev.NewBuffer(max(4*n, 16))
	if err != nil {
		return nil, fmt.Errorf("metal: buffer of %d bytes: %w: %w", 4*n, op.ErrOutOfMemory, err)
	}
	return &Tensor{buf: buf, n: n, dt: dt, own: true, b: b}, nil
}

// Free implements op.Backend: it releases a tensor from NewTensor (slices release nothing).
func (b *Backend) Free(t op.Tensor) {
	if mt, ok := t.(*Tensor); ok {
		mt.Release()
	}
}

// DType implements op.Tensor.
func (t *Tensor) DType() op.DType { return t.dt }

// Len is the number of elements.
func (t *Tensor) Len() int { return t.n }

// IsNil reports a nil *Tensor held in an op.Tensor (op.Present).
func (t *Tensor) IsNil() bool { return t == nil }

// F32 aliases the tensor's memory as float32 [Len] (nil for an I32 tensor).
func (t *Tensor) F32() []float32 {
	if t.n == 0 || t.dt != op.F32 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&t.buf.Contents()[t.off])), t.n)
}

// I32 aliases the tensor's memory as int32 [Len] (nil for an F32 tensor).
func (t *Tensor) I32() []int32 {
	if t.n == 0 || t.dt != op.I32 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&t.buf.Contents()[t.off])), t.n)
}

// Slice implements op.Tensor: elements [lo, hi) of t (same buffer). It panics on a range
// outside t, like a Go slice expression.
func (t *Tensor) Slice(lo, hi int) op.Tensor { return t.sub(lo, hi) }

func (t *Tensor) sub(lo, hi int) *Tensor {
	if lo < 0 || hi < lo || hi > t.n {
		panic(fmt.Sprintf("metal: tensor slice [%d:%d] of %d elements", lo, hi, t.n))
	}
	return &Tensor{buf: t.buf, off: t.off + 4*lo, n: hi - lo, dt: t.dt, b: t.b}
}

// Release frees the tensor's buffer when it owns one (NewTensor); slices release nothing.
func (t *Tensor) Release() {
	if t != nil && t.own && t.buf != nil {
		t.buf.Release()
		t.buf = nil
	}
}

// Weights keeps one model's weights on the device (op.Weights): each weight matrix is uploaded on
// its first use in its file format (bf16 and f16 stay 16-bit; the GEMMs widen in registers;
// QAffine weights stay packed: codes, scales and biases, dequantized inside the kernels; FP8Block
// and QFloat ones likewise as codes and scales; GGML ones as the file's blocks, raw bytes) into
// shared-storage buffers and reused by every later Pass; the routed experts of a layer are
// stacked per projection (one buffer, or one packed set, over the experts); small float32
// vectors (norm weights, gates) likewise. Bytes is the sum of what was uploaded: the packed size
// for quantized weights. A Weights is safe for concurrent use. Release frees the buffers.
type Weights struct {
	b      *Backend
	mu     sync.Mutex
	mats   map[*op.Matrix]mtl.Buffer
	qmats  map[*op.Matrix]*qweight
	fmats  map[*op.Matrix]*fpweight
	ggmats map[*op.Matrix]*ggweight
	exps   map[*op.Experts]expertStacks
	vecs   map[vecKey]*Tensor
	bytes  int64
	// ignored is the compute mode of WeightOptions when it was not f32 (run as f32).
	ignored op.ComputeMode
}

// stack is one projection of a layer's routed experts on the device: E dense matrices in one
// buffer (dense), E QAffine matrices stacked in one packed triple (q), E FP8Block or QFloat
// matrices in one packed pair (fp), or E GGML matrices' blocks in one buffer (gg).
type stack struct {
	dense mtl.Buffer
	q     *qweight
	fp    *fpweight
	gg    *ggweight
}

func (s stack) release() {
	if s.dense != nil {
		s.dense.Release()
	}
	s.q.release()
	s.fp.release()
	s.gg.release()
}

type vecKey struct {
	p *float32
	n int
}

// NewWeights implements op.Backend: an empty weight store on b. o.WidenBudget is ignored (the
// GEMMs widen 16-bit weights in registers: float32 copies would double the upload for nothing,
// and a partial budget would mix the dtypes of a layer's experts, which the grouped GEMM
// refuses); a non-zero budget is logged as ignored. o.Compute other than f32 is logged as
// ignored too (the Metal GEMMs run float32 arithmetic only; Weights.Compute says so).
func (b *Backend) NewWeights(o op.WeightOptions) op.Weights {
	if o.WidenBudget != 0 {
		b.logf("metal: WidenBudget %d ignored: the GEMMs widen 16-bit weights in registers", o.WidenBudget)
	}
	w := b.newWeights()
	if o.Compute != op.ComputeF32 {
		b.logf("metal: compute mode %v ignored: the Metal GEMMs run f32 only", o.Compute)
		w.ignored = o.Compute
	}
	return w
}

// Compute implements op.Weights: the Metal GEMMs run f32 (a mode asked for is named as ignored).
func (w *Weights) Compute() string {
	if w.ignored != op.ComputeF32 {
		return fmt.Sprintf("f32 (compute mode %v ignored: the Metal GEMMs run f32 only)", w.ignored)
	}
	return "f32"
}

// Prepare implements op.Weights: m itself (weights are uploaded in their file format).
func (w *Weights) Prepare(m *op.Matrix) (*op.Matrix, error) {
	if err := m.Validate("Weights.Prepare"); err != nil {
		return nil, err
	}
	return m, nil
}

func (b *Backend) newWeights() *Weights {
	return &Weights{b: b, mats: map[*op.Matrix]mtl.Buffer{}, qmats: map[*op.Matrix]*qweight{},
		fmats: map[*op.Matrix]*fpweight{}, ggmats: map[*op.Matrix]*ggweight{}, exps: map[*op.Experts]expertStacks{}, vecs: map[vecKey]*Tensor{}}
}

// Bytes is the number of weight bytes uploaded so far.
func (w *Weights) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes
}

// Release frees every uploaded weight; later passes upload them again.
func (w *Weights) Release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.mats {
		b.Release()
	}
	for _, q := range w.qmats {
		q.release()
	}
	for _, f := range w.fmats {
		f.release()
	}
	for _, g := range w.ggmats {
		g.release()
	}
	for _, e := range w.exps {
		e.release()
	}
	for _, t := range w.vecs {
		t.Release()
	}
	clear(w.mats)
	clear(w.qmats)
	clear(w.fmats)
	clear(w.ggmats)
	clear(w.exps)
	clear(w.vecs)
	w.bytes = 0
}

// newBuf allocates a weight buffer of n bytes and counts them in the store's Bytes.
func (w *Weights) newBuf(n int) (mtl.Buffer, error) {
	buf, err := w.b.dev.NewBuffer(max(n, 16))
	if err != nil {
		return nil, fmt.Errorf("metal: weight buffer of %d bytes: %w", n, err)
	}
	w.bytes += int64(n)
	return buf, nil
}

func copyU16(buf mtl.Buffer, off int, x []uint16) {
	if len(x) > 0 {
		copy(unsafe.Slice((*uint16)(unsafe.Pointer(&buf.Contents()[off])), len(x)), x)
	}
}

func copyF32(buf mtl.Buffer, off int, x []float32) {
	if len(x) > 0 {
		copy(unsafe.Slice((*float32)(unsafe.Pointer(&buf.Contents()[off])), len(x)), x)
	}
}

// matrix returns a dense m's device buffer (16-bit elements or float32, as stored); QAffine
// weights are read through qmatrix, FP8Block and QFloat ones through fpmatrix, GGML ones
// through ggmatrix.
func (w *Weights) matrix(m *op.Matrix) (mtl.Buffer, error) {
	if m.DType == op.QAffine || isFloatFormat(m) || m.DType == op.GGML {
		return nil, fmt.Errorf("metal: %w: a %v weight [%d, %d] given to a dense kernel", op.ErrDType, m.DType, m.N, m.K)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if buf, ok := w.mats[m]; ok {
		return buf, nil
	}
	var buf mtl.Buffer
	var err error
	if m.DType == op.F32 {
		if buf, err = w.newBuf(4 * len(m.F32)); err == nil {
			copyF32(buf, 0, m.F32)
		}
	} else if buf, err = w.newBuf(2 * len(m.U16)); err == nil {
		copyU16(buf, 0, m.U16)
	}
	if err != nil {
		return nil, err
	}
	w.mats[m] = buf
	return buf, nil
}

// expertStacks are the routed experts' weights on the device, each projection stacked over the
// experts (the grouped GEMMs' layout): gu the gate_up [E, 2I, D] (gate rows first), or, when the
// gate and up projections are stored apart in different formats, gu the gate [E, I, D] and up
// the up [E, I, D]; dn the down [E, D, I].
type expertStacks struct {
	gu, up, dn stack
	split      bool // gu holds the gate only, up the up projections
}

func (e expertStacks) release() {
	e.gu.release()
	e.up.release()
	e.dn.release()
}

// splitFormats reports whether ex stores gate and up apart in different formats, or in FP8Block
// (two grouped GEMMs: a gate [I, D] over an up [I, D] is no FP8Block [2I, D] when 128 does not
// divide I, its blocks would straddle the two); gate and up apart in one other format are
// stacked into one gate_up matrix per expert.
func splitFormats(ex *op.Experts) bool {
	return ex.Split() && (!sameFormat(ex.Up[0], ex.GateUp[0]) || ex.GateUp[0].DType == op.FP8Block)
}

// experts returns the routed experts' weights, each projection in its own dtype: dense
// matrices concatenated into one buffer, QAffine ones into one packed triple (uploadQuant),
// FP8Block and QFloat ones into one packed pair (uploadFP), GGML ones' blocks into one buffer
// (uploadGG).
// Each projection must have one dtype (and one bit width, group size and scale dtype) over the
// experts: MoEExperts checks it.
func (w *Weights) experts(ex *op.Experts) (expertStacks, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.exps[ex]; ok {
		return e, nil
	}
	var es expertStacks
	var err error
	gateUp := ex.GateUp
	switch {
	case splitFormats(ex):
		es.split = true
		if es.up, err = w.uploadStack(ex.Up); err != nil {
			return expertStacks{}, err
		}
	case ex.Split():
		// Gate and up stored apart (op.Experts.Up) in one format: stacked as gate rows then up
		// rows per expert, the [2I, D] gate_up layout.
		gateUp = make([]*op.Matrix, 0, 2*ex.E)
		for e := range ex.GateUp {
			gateUp = append(gateUp, ex.GateUp[e], ex.Up[e])
		}
	}
	if es.gu, err = w.uploadStack(gateUp); err != nil {
		es.release()
		return expertStacks{}, err
	}
	if es.dn, err = w.uploadStack(ex.Down); err != nil {
		es.release()
		return expertStacks{}, err
	}
	w.exps[ex] = es
	return es, nil
}

// uploadStack stacks matrices of one dtype and size (w.mu held).
func (w *Weights) uploadStack(ms []*op.Matrix) (stack, error) {
	if ms[0].DType == op.QAffine {
		q, err := uploadQuant(ms, w.newBuf)
		return stack{q: q}, err
	}
	if isFloatFormat(ms[0]) {
		f, err := uploadFP(ms, w.newBuf)
		return stack{fp: f}, err
	}
	if ms[0].DType == op.GGML {
		g, err := uploadGG(ms, w.newBuf)
		return stack{gg: g}, err
	}
	buf, err := uploadStacked(ms, w.newBuf)
	return stack{dense: buf}, err
}

// uploadStacked concatenates dense matrices of one dtype and size into one buffer.
func uploadStacked(ms []*op.Matrix, alloc func(int) (mtl.Buffer, error)) (mtl.Buffer, error) {
	es, n := 2, ms[0].N*ms[0].K
	if ms[0].DType == op.F32 {
		es = 4
	}
	buf, err := alloc(es * len(ms) * n)
	if err != nil {
		return nil, err
	}
	for e, m := range ms {
		if es == 4 {
			copyF32(buf, 4*e*n, m.F32)
		} else {
			copyU16(buf, 2*e*n, m.U16)
		}
	}
	return buf, nil
}

// vec returns x on the device, keyed by its first element and length.
func (w *Weights) vec(x []float32) (*Tensor, error) {
	if len(x) == 0 {
		return nil, fmt.Errorf("metal: %w: empty weight vector", op.ErrShape)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := vecKey{&x[0], len(x)}
	if t, ok := w.vecs[k]; ok {
		return t, nil
	}
	buf, err := w.newBuf(4 * len(x))
	if err != nil {
		return nil, err
	}
	copyF32(buf, 0, x)
	t := &Tensor{buf: buf, n: len(x), dt: op.F32, own: true, b: w.b}
	w.vecs[k] = t
	return t, nil
}

// Arena keeps a prefill's scratch tensors by name so that layers and later prefills reuse them
// (a tensor is reallocated only when a call needs more elements than it holds); it implements
// op.Scratch. An Arena belongs to one sequence of passes at a time (a session); Release frees
// its buffers.
type Arena struct {
	b  *Backend
	mu sync.Mutex
	m  map[string]*Tensor
	// retired holds tensors replaced by larger ones: a Pass may still have dispatches encoded
	// on them, so they are released when the next Pass begins (or at Release), not at once.
	retired []*Tensor
}

// NewScratch implements op.Backend: an empty scratch arena on b.
func (b *Backend) NewScratch() op.Scratch { return b.newArena() }

func (b *Backend) newArena() *Arena { return &Arena{b: b, m: map[string]*Tensor{}} }

// Tensor implements op.Scratch: the arena's tensor called name with n elements of dt (contents
// unspecified).
func (a *Arena) Tensor(name string, dt op.DType, n int) (op.Tensor, error) {
	return a.tensor(name, dt, n)
}

func (a *Arena) tensor(name string, dt op.DType, n int) (*Tensor, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.m[name]; ok && t.n >= n && t.dt == dt {
		return t.sub(0, n), nil
	}
	if t, ok := a.m[name]; ok {
		a.retired = append(a.retired, t)
		delete(a.m, name)
	}
	t, err := a.b.newTensor(dt, n)
	if err != nil {
		return nil, err
	}
	a.m[name] = t
	return t.sub(0, n), nil
}

// Bytes implements op.Scratch: the bytes of the arena's tensors (and of those waiting to be
// released).
func (a *Arena) Bytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, t := range a.m {
		n += 4 * int64(t.n)
	}
	for _, t := range a.retired {
		n += 4 * int64(t.n)
	}
	return n
}

// releaseRetired frees the tensors replaced during earlier passes (no pass of the arena is in
// flight when a new one begins).
func (a *Arena) releaseRetired() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.retired {
		t.Release()
	}
	a.retired = nil
}

// Release frees the arena's tensors.
func (a *Arena) Release() {
	a.releaseRetired()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.m {
		t.Release()
	}
	clear(a.m)
}
