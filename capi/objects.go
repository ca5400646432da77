//go:build cgo

package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stratakernels/strata/strata"
)

// The Go side of the C ABI: each function here is what one exported strata_* function does once
// its C arguments are read. They take and return Go values only, so tests can drive them from
// many goroutines under the race detector.

// handles is the process-wide handle table.
var handles = newHandleTable()

// refCount counts an object's references (its handle and what depends on it) and runs onLast
// when the last one goes.
type refCount struct {
	mu   sync.Mutex
	refs int
	what string
}

func (r *refCount) acquire() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs == 0 {
		return fmt.Errorf("%w: %s was freed", errInvalidHandle, r.what)
	}
	r.refs++
	return nil
}

// drop releases one reference and reports whether it was the last.
func (r *refCount) drop() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refs--
	return r.refs == 0
}

// deviceObj counts its references: the device handle, every model loaded on it and every op
// call running on it. The device (an emulator it opened, say) is closed when the last one goes,
// so freeing a device handle before its models is safe.
type deviceObj struct {
	d *strata.Device
	refCount
}

func (do *deviceObj) release() {
	if do.drop() {
		do.d.Close()
	}
}

// modelObj counts its references: the model handle and every session made from it. The model
// is closed when the last reference goes, so freeing a model handle before its sessions is safe.
type modelObj struct {
	m   *strata.Model
	dev *deviceObj
	refCount
}

func (mo *modelObj) release() {
	if mo.drop() {
		mo.m.Close()
		mo.dev.release()
	}
}

// sessionObj guards a session against use from two threads at once (strata.Session does too,
// but Position has no guard, and cancellation needs to know which call is running).
type sessionObj struct {
	s      *strata.Session
	model  *modelObj
	busy   atomic.Bool
	freed  atomic.Bool
	mu     sync.Mutex // guards cancel
	cancel context.CancelFunc
}

// enter marks the session in use by the calling thread until leave.
func (so *sessionObj) enter() error {
	if !so.busy.CompareAndSwap(false, true) {
		if so.freed.Load() {
			return fmt.Errorf("%w: strata_session was freed", errInvalidHandle)
		}
		return fmt.Errorf("%w: another thread is using this strata_session", strata.ErrBusy)
	}
	if so.freed.Load() {
		so.busy.Store(false)
		return fmt.Errorf("%w: strata_session was freed", errInvalidHandle)
	}
	return nil
}

func (so *sessionObj) leave() { so.busy.Store(false) }

// cancellable returns the context of a prefill about to run on the session, which
// strata_session_cancel cancels until done is called.
func (so *sessionObj) cancellable() (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(context.Background())
	so.mu.Lock()
	so.cancel = cancel
	so.mu.Unlock()
	return ctx, func() {
		so.mu.Lock()
		so.cancel = nil
		so.mu.Unlock()
		cancel()
	}
}

type snapshotObj struct{ sn *strata.Snapshot }

func getObj[T any](h uintptr, k kind) (T, error) {
	var zero T
	obj, err := handles.get(h, k)
	if err != nil {
		return zero, err
	}
	return obj.(T), nil
}

func deviceOpen(backend int32) (uintptr, error) {
	names := map[int32]string{0: "auto", 1: "cpu", 2: "metal", 3: "emu"}
	name, ok := names[backend]
	if !ok {
		return 0, fmt.Errorf("%w: backend %d (want STRATA_BACKEND_AUTO, _CPU, _METAL or _EMU)", strata.ErrInvalidArgument, backend)
	}
	d, err := strata.Open(strata.Options{Backend: name, Log: hostLog})
	if err != nil {
		return 0, err
	}
	return handles.add(kindDevice, &deviceObj{d: d, refCount: refCount{refs: 1, what: "strata_device"}}), nil
}

func deviceFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	obj, err := handles.remove(h, kindDevice)
	if err != nil {
		return err
	}
	obj.(*deviceObj).release()
	return nil
}

// withDevice runs fn on the device of handle h, holding a reference so that a concurrent
// strata_device_free cannot close it meanwhile.
func withDevice(h uintptr, fn func(d *strata.Device) error) error {
	do, err := getObj[*deviceObj](h, kindDevice)
	if err != nil {
		return err
	}
	if err := do.acquire(); err != nil {
		return err
	}
	defer do.release()
	return fn(do.d)
}

func deviceInfo(h uintptr) (backend, kernels string, err error) {
	do, err := getObj[*deviceObj](h, kindDevice)
	if err != nil {
		return "", "", err
	}
	return do.d.Backend(), do.d.Kernels(), nil
}

func modelLoad(dev uintptr, dir string, opts strata.LoadOptions) (uintptr, error) {
	do, err := getObj[*deviceObj](dev, kindDevice)
	if err != nil {
		return 0, err
	}
	if err := do.acquire(); err != nil {
		return 0, err
	}
	m, err := strata.LoadModel(do.d, dir, opts)
	if err != nil {
		do.release()
		return 0, err
	}
	return handles.add(kindModel, &modelObj{m: m, dev: do, refCount: refCount{refs: 1, what: "strata_model"}}), nil
}

func modelFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	obj, err := handles.remove(h, kindModel)
	if err != nil {
		return err
	}
	obj.(*modelObj).release()
	return nil
}

// withModel runs fn on the model of handle h, holding a reference so that a concurrent
// strata_model_free cannot close it meanwhile.
func withModel(h uintptr, fn func(m *strata.Model) error) error {
	mo, err := getObj[*modelObj](h, kindModel)
	if err != nil {
		return err
	}
	if err := mo.acquire(); err != nil {
		return err
	}
	defer mo.release()
	return fn(mo.m)
}

func sessionNew(model uintptr, maxContext int64) (uintptr, error) {
	mo, err := getObj[*modelObj](model, kindModel)
	if err != nil {
		return 0, err
	}
	if maxContext < 0 || maxContext > 1<<24 {
		return 0, fmt.Errorf("%w: max_context %d out of range [0, %d]", strata.ErrInvalidArgument, maxContext, 1<<24)
	}
	if err := mo.acquire(); err != nil {
		return 0, err
	}
	s, err := mo.m.NewSession(strata.SessionOptions{MaxContext: int(maxContext)})
	if err != nil {
		mo.release()
		return 0, err
	}
	return handles.add(kindSession, &sessionObj{s: s, model: mo}), nil
}

func sessionFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	so, err := getObj[*sessionObj](h, kindSession)
	if err != nil {
		return err
	}
	if err := so.enter(); err != nil {
		return err
	}
	if _, err := handles.remove(h, kindSession); err != nil {
		so.leave()
		return err
	}
	so.freed.Store(true)
	err = so.s.Close()
	so.leave()
	so.model.release()
	return err
}

// withSession runs fn with the session of handle h entered (exclusive to the calling thread).
func withSession(h uintptr, fn func(so *sessionObj) error) error {
	so, err := getObj[*sessionObj](h, kindSession)
	if err != nil {
		return err
	}
	if err := so.enter(); err != nil {
		return err
	}
	defer so.leave()
	return fn(so)
}

// prefillOut describes where a prefill's logits go: have is false when the caller passed no
// buffer; capacity is its length in floats; buf returns the buffer, sized to need, once the
// capacity has been checked.
type prefillOut struct {
	have     bool
	capacity uint64
	buf      func(need int) []float32
}

// prefillReq are a prefill's options: all logits, the step (strata.PrefillOptions.Step), and a
// pipeline stage's input streams and output buffer.
type prefillReq struct {
	all       bool
	step      int
	hiddenIn  []float32
	hiddenOut prefillOut
}

// sessionPrefill prefills tokens and writes the logits to out (and a stage's residual streams to
// req.hiddenOut); it returns the number of logit floats written. Buffer sizes are checked before
// any work.
func sessionPrefill(h uintptr, tokens []int32, req prefillReq, out prefillOut) (int, error) {
	written := 0
	err := withSession(h, func(so *sessionObj) error {
		m := so.s.Model()
		lo, hi := m.LayerRange()
		rows := 1
		if req.all {
			rows = len(tokens)
		}
		if hi < m.Layers() {
			rows = 0
			if out.have {
				return fmt.Errorf("%w: a stage ending at layer %d of %d has no head: it returns hidden_out, not logits (pass logits_out NULL)", strata.ErrInvalidArgument, hi, m.Layers())
			}
		}
		need := rows * m.Vocab()
		if out.have && out.capacity < uint64(need) {
			return fmt.Errorf("%w: logits_cap %d floats is too small: %d rows x %d vocab = %d needed", strata.ErrShape, out.capacity, rows, m.Vocab(), need)
		}
		needH := 0
		if hi < m.Layers() {
			needH = len(tokens) * m.HiddenSize()
			if !req.hiddenOut.have {
				return fmt.Errorf("%w: a stage ending at layer %d of %d returns its residual streams: hidden_out must hold %d tokens x %d floats", strata.ErrInvalidArgument, hi, m.Layers(), len(tokens), m.HiddenSize())
			}
			if req.hiddenOut.capacity < uint64(needH) {
				return fmt.Errorf("%w: hidden_out_cap %d floats is too small: %d tokens x %d = %d needed", strata.ErrShape, req.hiddenOut.capacity, len(tokens), m.HiddenSize(), needH)
			}
		} else if req.hiddenOut.have {
			return fmt.Errorf("%w: hidden_out given to a model that holds the head (it returns logits)", strata.ErrInvalidArgument)
		}
		switch {
		case lo > 0 && req.hiddenIn == nil:
			return fmt.Errorf("%w: a stage starting at layer %d takes the previous stage's residual streams: hidden_in must hold %d tokens x %d floats", strata.ErrInvalidArgument, lo, len(tokens), m.HiddenSize())
		case lo > 0 && len(req.hiddenIn) != len(tokens)*m.HiddenSize():
			return fmt.Errorf("%w: hidden_in_len %d floats, want %d tokens x %d = %d", strata.ErrShape, len(req.hiddenIn), len(tokens), m.HiddenSize(), len(tokens)*m.HiddenSize())
		case lo == 0 && req.hiddenIn != nil:
			return fmt.Errorf("%w: hidden_in given to a model that starts at layer 0 (it embeds the tokens itself)", strata.ErrInvalidArgument)
		}
		ctx, done := so.cancellable()
		defer done()
		lg, err := so.s.Prefill(ctx, tokens, strata.PrefillOptions{AllLogits: req.all, Step: req.step, Hidden: req.hiddenIn})
		if err != nil {
			return err
		}
		if len(lg.Data) != need || len(lg.Hidden) != needH {
			return fmt.Errorf("internal: prefill returned %d logits and %d hidden floats, want %d and %d", len(lg.Data), len(lg.Hidden), need, needH)
		}
		if out.have {
			written = copy(out.buf(need), lg.Data)
		}
		if needH > 0 {
			copy(req.hiddenOut.buf(needH), lg.Hidden)
		}
		return nil
	})
	return written, err
}

// sessionCancel cancels the prefill running on the session, if any. It does not enter the
// session: it is the one call made while another thread uses it.
func sessionCancel(h uintptr) error {
	so, err := getObj[*sessionObj](h, kindSession)
	if err != nil {
		return err
	}
	so.mu.Lock()
	if so.cancel != nil {
		so.cancel()
	}
	so.mu.Unlock()
	return nil
}

func sessionPosition(h uintptr) (int64, error) {
	var pos int64
	err := withSession(h, func(so *sessionObj) error {
		pos = int64(so.s.Position())
		return nil
	})
	return pos, err
}

func sessionReset(h uintptr) error {
	return withSession(h, func(so *sessionObj) error { return so.s.Reset() })
}

func sessionSnapshot(h uintptr) (uintptr, error) {
	var sn *strata.Snapshot
	err := withSession(h, func(so *sessionObj) error {
		var err error
		sn, err = so.s.Snapshot()
		return err
	})
	if err != nil {
		return 0, err
	}
	return handles.add(kindSnapshot, &snapshotObj{sn: sn}), nil
}

func sessionRestore(h, snap uintptr) error {
	so, err := getObj[*snapshotObj](snap, kindSnapshot)
	if err != nil {
		return err
	}
	return withSession(h, func(s *sessionObj) error { return s.s.Restore(so.sn) })
}

func snapshotPosition(h uintptr) (int64, error) {
	so, err := getObj[*snapshotObj](h, kindSnapshot)
	if err != nil {
		return 0, err
	}
	return int64(so.sn.Position()), nil
}

func snapshotFree(h uintptr) error {
	if h == 0 {
		return nil
	}
	_, err := handles.remove(h, kindSnapshot)
	return err
}

// prefillOnce is strata_prefill: a device, a model and a session made and released around one
// prefill.
func prefillOnce(dir string, tokens []int32, req prefillReq, out prefillOut) (int, error) {
	if len(tokens) == 0 {
		return 0, fmt.Errorf("%w: empty prompt", strata.ErrInvalidArgument)
	}
	dev, err := deviceOpen(0)
	if err != nil {
		return 0, err
	}
	defer deviceFree(dev)
	m, err := modelLoad(dev, dir, strata.LoadOptions{})
	if err != nil {
		return 0, err
	}
	defer modelFree(m)
	s, err := sessionNew(m, int64(len(tokens)))
	if err != nil {
		return 0, err
	}
	defer sessionFree(s)
	return sessionPrefill(s, tokens, req, out)
}
