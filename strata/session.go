package strata

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stratakernels/strata/op"
)

// SessionOptions configure NewSession.
type SessionOptions struct {
	// MaxContext is the most tokens the session can hold (cache capacity). 0 means 4096 or the
	// model's max_position_embeddings, whichever is smaller. At most 2^24, and the K/V cache of
	// one layer (MaxContext x Hkv x head_dim elements) must stay under 2^31 (32-bit offsets):
	// 2^21 tokens for the real models' 2 x 256.
	MaxContext int
}

// DefaultStep is the most tokens a Prefill runs at once unless PrefillOptions.Step says
// otherwise: a longer prompt runs in steps of DefaultStep tokens, so the activation memory of a
// call is bounded whatever the prompt's length (mlx-lm prefills in steps of 2048 tokens,
// llama.cpp in micro-batches of 512). 1024 rather than 2048 halves the activations (a peak
// RSS 0.25-0.43 GiB lower for the qwen3next slice's 2048 tokens), and the fresh pages a first
// prefill touches cost more than the larger products gain: BENCHMARKS.md, "Steps of 1024".
const DefaultStep = 1024

// OneShot as PrefillOptions.Step runs the whole prompt in one step.
const OneShot = -1

// PrefillOptions configure one Prefill call.
type PrefillOptions struct {
	// AllLogits returns logits for every new token instead of only the last one.
	AllLogits bool
	// Progress, when set, is called after each layer of each step with (layers done, total
	// layers of all steps).
	Progress func(done, total int)
	// Step is the most tokens processed at once: a longer prompt runs in consecutive steps of
	// Step tokens within the call (activation memory O(Step), not O(T)), with the same results as
	// explicit chunked calls of that size. 0 means DefaultStep; OneShot (any negative value)
	// runs the whole prompt in one step.
	Step int
	// Hidden is the input of a pipeline stage that starts after layer 0 (LoadOptions.Layers):
	// the residual streams [T, S*D] (Model.HiddenSize per token) that the stage before returned
	// for the same tokens (Logits.Hidden). It must be nil for a model that holds layer 0.
	Hidden []float32
}

// Logits are the output of a prefill: float32 [Rows, Vocab] row-major. Row r is the
// next-token distribution (unnormalised) after the token at absolute position Pos0+r (AllLogits)
// or after the last token (Rows == 1, Pos0 = position of the last token). A pipeline stage
// without the model's head returns no rows and its residual streams in Hidden instead.
type Logits struct {
	Rows, Vocab int
	Pos0        int
	Data        []float32
	// Hidden, from a stage that ends before the last layer (LoadOptions.Layers), is the residual
	// streams [T, S*D] after its last layer: the next stage's PrefillOptions.Hidden.
	Hidden []float32
	// Stats of the call that produced them.
	Stats Stats
}

// Row returns row r ([Vocab]), aliasing Data; like slice indexing it panics when r is outside [0, Rows).
func (l *Logits) Row(r int) []float32 { return l.Data[r*l.Vocab : (r+1)*l.Vocab] }

// Stage names the parts of a prefill timed in Stats.
type Stage int

// Stages of a prefill.
const (
	StageGEMM          Stage = iota // dense projections, router, lm_head
	StageAttention                  // q/k norms and RoPE, the (QSA-sparse) attention, its output gate
	StageGDN                        // gdn_pre (conv, l2norm, gates), scan, post
	StageMoE                        // routing, expert GEMMs, combine
	StageGatedResidual              // reads, writes, norms
	StagePLE                        // n-gram hashing, gating, conv
	StageIndexer                    // QSA indexer: index q/k norms and RoPE, block keys, scores, top-k block selection (its projection counts as GEMM)
	numStages
)

func (s Stage) String() string {
	return [...]string{"GEMM", "attention", "GDN", "MoE", "GatedResidual", "PLE", "indexer"}[s]
}

// Add sums the figures of o, the next call or step of the same prompt, into s: tokens, times,
// each stage's time and CPU time. PerStage holds when it holds for both (an empty s takes o's).
func (s *Stats) Add(o Stats) {
	s.Tokens += o.Tokens
	s.Total += o.Total
	s.Device += o.Device
	for i := range s.Stage {
		s.Stage[i] += o.Stage[i]
		s.CPU[i] += o.CPU[i]
		s.SysCPU[i] += o.SysCPU[i]
	}
	s.PerStage = o.PerStage && (s.PerStage || s.Tokens == o.Tokens)
}

// Stats report one prefill's work: wall time and time per stage, and on the CPU the CPU time
// per stage. On the CPU a stage's time is the wall time of its ops; on the emulator the wall time of its kernels' dispatches; on an
// Apple GPU without per-dispatch timing only the whole command buffer's time is known (Device,
// with PerStage false) and Stage holds only host-side work.
type Stats struct {
	Tokens int
	Total  time.Duration
	Stage  [numStages]time.Duration
	// Device is the time the backend reported for the whole prefill pass.
	Device time.Duration
	// PerStage reports whether Stage covers the device work (false: see Device).
	PerStage bool
	// CPU is the process's CPU time (user + system, summed over every thread) during each
	// stage's ops, and SysCPU its system part (page faults and other kernel work): on the CPU
	// backend on Linux and macOS, zero elsewhere. CPU[s] / (Stage[s] x GOMAXPROCS) is about the
	// share of the cores a stage kept busy. Approximately: the kernel accounts the time of the
	// threads running on other cores at its ticks (milliseconds), other threads of the process
	// running meanwhile count too, and a stage's host-side work (Stage, PLE ids) does not; on
	// stages of a few milliseconds it can read over 100%.
	CPU, SysCPU [numStages]time.Duration
}

// Session holds one sequence's cache (per attention layer K after k_norm and RoPE, V and the
// indexer's raw keys; per GDN layer the short-conv and fp32 recurrent states; per PLE layer its
// conv state and last two token ids) in the device's memory, and runs prefills that extend it.
// A Session is used by one goroutine at a time: a concurrent call returns an error wrapping
// ErrBusy and changes nothing.
type Session struct {
	m       *Model
	maxCtx  int
	pos     int
	ids     []int32 // the token ids of the cache's content, ids[i] at position i (len == pos)
	state   *cache
	scratch op.Scratch // activations of the prefill, reused by every layer and later prefills
	busy    atomic.Bool
	closed  bool // set by Close while it holds busy, so no call races it
	// trace, when set (tests), receives intermediate tensors.
	trace func(layer int, name string, data []float32)
	// traceSel, when set (tests), receives the QSA selection mask rows.
	traceSel func(layer int, t int, keys []int32, dense bool)
}

// NewSession allocates a session with an empty cache on the model's device. Errors wrap
// ErrInvalidArgument (nil model, MaxContext out of range), ErrOutOfMemory or ErrClosed.
func (m *Model) NewSession(opts SessionOptions) (*Session, error) {
	if m == nil {
		return nil, wrapf(ErrInvalidArgument, nil, "nil model")
	}
	if m.closed.Load() {
		return nil, wrapf(ErrClosed, nil, "model is closed")
	}
	c := m.cfg
	maxCtx := opts.MaxContext
	if maxCtx == 0 {
		maxCtx = 4096
		if c.MaxPositions > 0 && c.MaxPositions < maxCtx {
			maxCtx = c.MaxPositions
		}
	}
	if maxCtx < 1 || maxCtx > 1<<24 {
		return nil, wrapf(ErrInvalidArgument, nil, "MaxContext %d out of range [1, %d]", maxCtx, 1<<24)
	}
	// 32-bit offsets: K/V rows * Hkv * HeadDim must stay below 2^31 so every backend's offsets fit.
	if int64(maxCtx)*int64(max(c.Hkv, 1))*int64(c.HeadDim) >= 1<<31 {
		return nil, wrapf(ErrInvalidArgument, nil, "MaxContext %d: KV cache of %d x %d x %d elements overflows 32-bit offsets", maxCtx, maxCtx, c.Hkv, c.HeadDim)
	}
	if c.MaxPositions > 0 && maxCtx > c.MaxPositions {
		m.dev.logf(LogWarn, "session MaxContext %d exceeds the model's max_position_embeddings %d: positions past it were never trained", maxCtx, c.MaxPositions)
	}
	sc, st := m.takeSpare(maxCtx)
	if st == nil {
		var err error
		if st, err = newCache(m, maxCtx); err != nil {
			m.keepSpare(sc, nil, 0)
			return nil, err
		}
		st.initial = true // zeroed, as a cleared one
	}
	return &Session{m: m, maxCtx: maxCtx, state: st, scratch: sc}, nil
}

// Position is the number of tokens in the cache (pos0 of the next prefill); 0 for nil.
func (s *Session) Position() int {
	if s == nil {
		return 0
	}
	return s.pos
}

// MaxContext is the session's capacity in tokens.
func (s *Session) MaxContext() int { return s.maxCtx }

// Model returns the session's model.
func (s *Session) Model() *Model { return s.m }

// Tokens returns a copy of the token ids the session's state was made from, one per position
// (len == Position()): every successful prefill appends its tokens (a pipeline stage fed Hidden
// included), Reset empties them, Restore and LoadState set them with the state. Errors wrap
// ErrBusy or ErrClosed.
func (s *Session) Tokens() ([]int32, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return append([]int32(nil), s.ids...), nil
}

func (s *Session) acquire() error {
	if s == nil {
		return wrapf(ErrInvalidArgument, nil, "nil session")
	}
	if !s.busy.CompareAndSwap(false, true) {
		return wrapf(ErrBusy, nil, "session is in use by another call")
	}
	s.m.use.RLock()
	if s.closed || s.m.closed.Load() {
		s.m.use.RUnlock()
		s.busy.Store(false)
		return wrapf(ErrClosed, nil, "session or model is closed")
	}
	return nil
}

func (s *Session) release() {
	s.m.use.RUnlock()
	s.busy.Store(false)
}

// Close ends the session. Its cache and activation buffers (the scratch: one prefill step's
// activations, as Prefill's memory check estimates them) go back to an open model, which keeps
// one closed session's for its next NewSession (the cache when its MaxContext is the same,
// cleared) and frees them in Model.Close; they are freed at once when the model is closed or
// already keeps a set. Further calls return ErrClosed; closing twice is a no-op; closing while
// another call runs returns ErrBusy.
func (s *Session) Close() error {
	if s == nil {
		return nil
	}
	if !s.busy.CompareAndSwap(false, true) {
		return wrapf(ErrBusy, nil, "session is in use by another call")
	}
	defer s.busy.Store(false)
	if s.closed {
		return nil
	}
	s.m.use.RLock()
	defer s.m.use.RUnlock()
	s.closed = true
	s.m.keepSpare(s.scratch, s.state, s.maxCtx)
	s.state, s.scratch = nil, nil
	return nil
}

// Reset empties the cache (position 0).
func (s *Session) Reset() error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	s.state.clear(s.m)
	s.pos = 0
	s.ids = nil
	return nil
}

// Snapshot is a copy of a session's whole state (hybrid models cannot rewind a recurrent state
// by truncating a cache, so a branch point is a full copy). It can be restored into any session
// of the same Model (the value LoadModel returned; a second load of the same checkpoint is
// another Model) with enough capacity.
type Snapshot struct {
	m   *Model
	pos int
	ids []int32 // the token ids of the state (Session.Tokens)
	st  *snapshotState
}

// Position of the snapshot; 0 for nil.
func (sn *Snapshot) Position() int {
	if sn == nil {
		return 0
	}
	return sn.pos
}

// Tokens returns a copy of the token ids the snapshot's state was made from (nil for nil).
func (sn *Snapshot) Tokens() []int32 {
	if sn == nil {
		return nil
	}
	return append([]int32(nil), sn.ids...)
}

// Snapshot copies the session's state (and its token ids) into host memory.
func (s *Session) Snapshot() (*Snapshot, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return s.snapshotLocked(), nil
}

// snapshotLocked is Snapshot for a caller that holds the session.
func (s *Session) snapshotLocked() *Snapshot {
	return &Snapshot{m: s.m, pos: s.pos, ids: append([]int32(nil), s.ids...), st: s.state.snapshot(s.pos)}
}

// Restore replaces the session's state with a copy of the snapshot's. Errors wrap
// ErrInvalidArgument (snapshot of another model), ErrCapacity (snapshot longer than the
// session's MaxContext) or ErrOutOfMemory; on error the session is unchanged.
func (s *Session) Restore(sn *Snapshot) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	return s.restoreLocked(sn)
}

// restoreLocked is Restore for a caller that holds the session.
func (s *Session) restoreLocked(sn *Snapshot) error {
	if sn == nil || sn.st == nil {
		return wrapf(ErrInvalidArgument, nil, "nil snapshot")
	}
	if sn.m != s.m {
		return wrapf(ErrInvalidArgument, nil, "snapshot belongs to another model")
	}
	if sn.pos > s.maxCtx {
		return wrapf(ErrCapacity, nil, "snapshot holds %d tokens, session capacity is %d", sn.pos, s.maxCtx)
	}
	// Copy into a fresh cache so that a failure leaves the session as it was.
	st, err := newCache(s.m, s.maxCtx)
	if err != nil {
		return err
	}
	if err := st.load(sn.st); err != nil {
		st.free(s.m.dev.be)
		return err
	}
	s.swapState(st, sn.pos, append([]int32(nil), sn.ids...))
	return nil
}

// swapState replaces the session's cache by st holding pos tokens made from ids, freeing the
// old one.
func (s *Session) swapState(st *cache, pos int, ids []int32) {
	s.state.free(s.m.dev.be)
	s.state = st
	s.pos = pos
	s.ids = ids
}

// Equal reports whether two snapshots hold bitwise identical state (tests, debugging).
func (sn *Snapshot) Equal(o *Snapshot) bool {
	if sn == nil || o == nil || sn.m != o.m || sn.pos != o.pos || !slices.Equal(sn.ids, o.ids) {
		return false
	}
	return sn.st.equal(o.st)
}

// Prefill runs tokens through the model at positions Position()..Position()+len(tokens)-1,
// extending the cache, and returns the last token's logits (all tokens' with opts.AllLogits; a
// pipeline stage before the last returns its residual streams instead, Logits.Hidden). A prompt
// longer than opts.Step runs in steps within the call. Validation happens before any work: an
// empty prompt, a token id outside [0, vocab), or a Hidden of the wrong length or holding NaN
// or Inf wraps ErrInvalidArgument, a prompt that would exceed MaxContext wraps ErrCapacity, and
// a step whose activations (and, with AllLogits, logits) would not fit in the memory available
// wraps ErrOutOfMemory naming both byte counts. Cancellation of ctx is checked between layers and
// wraps ErrCancelled. A failed or cancelled prefill leaves the session exactly as it was
// (position and every cache byte), whichever step it failed in.
func (s *Session) Prefill(ctx context.Context, tokens []int32, opts PrefillOptions) (*Logits, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	return s.prefillLocked(ctx, tokens, opts, 0, nil)
}

// afterStep, when given to prefillLocked, is called after each step with the session holding
// pos tokens and the step's logits (the last token's row in the last step); the prompt cache
// takes its checkpoints there.
type afterStep func(pos int, lg *Logits)

// prefillLocked is Prefill for a caller that holds the session. With grid > 0 its steps also
// end at every absolute position (session position) that is a multiple of grid.
func (s *Session) prefillLocked(ctx context.Context, tokens []int32, opts PrefillOptions, grid int, hook afterStep) (*Logits, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m := s.m
	T := len(tokens)
	if T == 0 {
		return nil, wrapf(ErrInvalidArgument, nil, "empty prompt")
	}
	V := m.cfg.Vocab
	for i, t := range tokens {
		if t < 0 || int(t) >= V {
			return nil, wrapf(ErrInvalidArgument, nil, "token %d at index %d is outside [0, %d)", t, i, V)
		}
	}
	switch {
	case m.lo > 0 && len(opts.Hidden) != T*m.HiddenSize():
		return nil, wrapf(ErrInvalidArgument, nil, "a stage starting at layer %d needs PrefillOptions.Hidden of %d tokens x %d floats (the previous stage's Logits.Hidden), have %d floats",
			m.lo, T, m.HiddenSize(), len(opts.Hidden))
	case m.lo == 0 && opts.Hidden != nil:
		return nil, wrapf(ErrInvalidArgument, nil, "PrefillOptions.Hidden given to a model that starts at layer 0 (it embeds the tokens itself)")
	}
	for i, v := range opts.Hidden {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, wrapf(ErrInvalidArgument, nil, "PrefillOptions.Hidden[%d] (token %d) is %v: the residual streams must be finite", i, i/m.HiddenSize(), v)
		}
	}
	if s.pos+T > s.maxCtx {
		return nil, wrapf(ErrCapacity, nil, "prefill of %d tokens at position %d exceeds the session's %d-token context", T, s.pos, s.maxCtx)
	}
	step := opts.Step
	if step == 0 {
		step = DefaultStep
	}
	if step < 0 || step > T {
		step = T
	}
	head := m.hi == m.cfg.Layers
	if err := s.checkMemory(step, T, head && opts.AllLogits); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, wrapf(ErrCancelled, err, "before prefill")
	}
	// A panic in the caller's Progress callback must not leave a half-run prefill behind: it is
	// recovered, the prefill stops at the next layer boundary as if cancelled (so the state is
	// restored), and the call returns an error naming the panic.
	var cbPanic any
	progress := opts.Progress
	if p := opts.Progress; p != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		progress = func(done, total int) {
			if cbPanic != nil {
				return
			}
			defer func() {
				if r := recover(); r != nil {
					cbPanic = r
					cancel()
				}
			}()
			p(done, total)
		}
	}
	// Per-token caches (K/V/index keys) are only written at rows >= the starting position, which
	// a failed call leaves unused; the fixed-size states are backed up once and restored on
	// failure (after the Pass ended, whatever of it ran), and the position goes back. A cache
	// still in its initial state is cleared instead: nothing to copy.
	pos0 := s.pos
	initial := s.state.initial
	var saved map[int][2]int32
	if !initial {
		saved = s.state.backup()
	}
	s.state.initial = false
	fail := func(err error) (*Logits, error) {
		if initial {
			s.state.clear(m)
		} else {
			s.state.restore(saved)
		}
		s.pos = pos0
		s.ids = s.ids[:pos0]
		if cbPanic != nil {
			return nil, wrapf(ErrInvalidArgument, nil, "PrefillOptions.Progress panicked (%v); the prefill was abandoned and the session is unchanged", cbPanic)
		}
		return nil, err
	}
	// The steps' ends (indices into tokens): every step tokens, and, with a grid, at every
	// absolute position that is a multiple of grid as well.
	var ends []int
	for at := 0; at < T; at = ends[len(ends)-1] {
		end := min(at+step, T)
		if grid > 0 {
			end = min(end, ((pos0+at)/grid+1)*grid-pos0)
		}
		ends = append(ends, end)
	}
	steps := len(ends)
	collect := m.stepBytes(step) >= collectBytes
	out := &Logits{Vocab: V, Pos0: pos0}
	for k, end := range ends {
		at := 0
		if k > 0 {
			at = ends[k-1]
		}
		spec := stepSpec{progress: progress, doneLayer: k * len(m.layers), allLayers: steps * len(m.layers), keepH: !head}
		if head && (opts.AllLogits || k == steps-1) {
			spec.rows = 1
			if opts.AllLogits {
				spec.rows = end - at
			}
		}
		if opts.Hidden != nil {
			spec.hidden = opts.Hidden[at*m.HiddenSize() : end*m.HiddenSize()]
		}
		lg, err := s.run(ctx, tokens[at:end], spec)
		if err != nil {
			return fail(err)
		}
		s.pos += end - at
		s.ids = append(s.ids, tokens[at:end]...)
		if hook != nil {
			hook(s.pos, lg)
		}
		out.Rows += lg.Rows
		out.Data = append(out.Data, lg.Data...)
		out.Hidden = append(out.Hidden, lg.Hidden...)
		if !opts.AllLogits {
			out.Pos0 = lg.Pos0
		}
		out.Stats.Add(lg.Stats)
		if collect {
			// The ops' temporaries of this step are garbage now. The Go heap's goal is twice
			// what is live, and widened weights (float32 copies) are live, so without a
			// collection here the garbage of every step would pile up to gigabytes before the
			// collector ran: memory would grow with T after all.
			runtime.GC()
		}
	}
	return out, nil
}

// collectBytes is the size of a step's temporaries from which a prefill collects garbage after
// each step (a collection costs milliseconds, a step of that size hundreds of them or more).
const collectBytes = 256 << 20

func (s *Session) String() string {
	return fmt.Sprintf("session(%s, position %d of %d)", s.m.Arch(), s.pos, s.maxCtx)
}
