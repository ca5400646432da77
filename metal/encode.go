package metal

import (
	"fmt"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Pass is one command buffer with one compute encoder (op.Pass): a prefill chunk encodes all its
// ops into one Pass over device tensors (Begin), commits once and waits once. Encoding errors are
// sticky: the first one is returned by every later op and by Commit.
type Pass struct {
	b      *Backend
	cb     mtl.CommandBuffer
	enc    mtl.ComputeEncoder
	w      *Weights // device-resident weights of the model
	a      *Arena   // scratch of the session
	bufs   []mtl.Buffer
	err    error
	done   bool
	stage  int
	stages []int // the Stage tag of each dispatch, in order
}

var _ op.Pass = (*Pass)(nil)

func (b *Backend) begin() (*Pass, error) {
	cb, err := b.dev.NewCommandBuffer()
	if err != nil {
		return nil, fmt.Errorf("metal: command buffer: %w", err)
	}
	enc, err := cb.ComputeEncoder()
	if err != nil {
		return nil, fmt.Errorf("metal: compute encoder: %w", err)
	}
	return &Pass{b: b, cb: cb, enc: enc}, nil
}

// Begin implements op.Backend: one command buffer whose ops read their weights from w (this
// backend's NewWeights: uploaded on first use and kept for the next passes) and take their
// internal scratch from s (this backend's NewScratch). Encode ops with the Pass methods, then
// Commit once; Abandon drops an encoded Pass without running it (nothing it would write
// changes). Errors wrap op.ErrInvalidArgument (a store of another backend) or the device's errors.
func (b *Backend) Begin(w op.Weights, s op.Scratch) (op.Pass, error) {
	mw, ok1 := w.(*Weights)
	ma, ok2 := s.(*Arena)
	if !ok1 || !ok2 || mw.b != b || ma.b != b {
		return nil, fmt.Errorf("metal: %w: weights or scratch of another backend", op.ErrInvalidArgument)
	}
	ma.releaseRetired()
	j, err := b.begin()
	if err != nil {
		return nil, err
	}
	j.w, j.a = mw, ma
	return j, nil
}

// Err is the first encoding error of the Pass (nil while it is fine).
func (j *Pass) Err() error { return j.err }

// Stage implements op.Pass: later dispatches are timed under stage.
func (j *Pass) Stage(stage int) { j.stage = stage }

// dispatchTimer is implemented by command buffers that time each dispatch (the emulator).
type dispatchTimer interface{ DispatchTimes() []time.Duration }

// Commit implements op.Pass: it ends encoding, commits the command buffer and waits for it; it
// returns the first encoding error (then nothing runs) or the command buffer's error (wrapping
// op.ErrBackend and mtl.ErrExecution). Buffers the Pass allocated itself are released. Timing:
// per Stage where the device times each dispatch (the emulator: wall time per dispatch), else
// the wall time of the commit and wait as Total.
func (j *Pass) Commit() (op.Timing, error) {
	if j.done {
		return op.Timing{}, fmt.Errorf("metal: %w: pass already finished", op.ErrInvalidArgument)
	}
	defer j.release()
	t0 := time.Now()
	if err := j.finish(); err != nil {
		return op.Timing{}, err
	}
	tm := op.Timing{Total: time.Since(t0)}
	if dt, ok := j.cb.(dispatchTimer); ok {
		if times := dt.DispatchTimes(); len(times) == len(j.stages) {
			tm.PerStage, tm.Total = true, 0
			for i, d := range times {
				st := j.stages[i]
				for len(tm.Stage) <= st {
					tm.Stage = append(tm.Stage, 0)
				}
				tm.Stage[st] += d
				tm.Total += d
			}
		}
	}
	return tm, nil
}

// Abandon ends encoding without committing: the encoded work never runs.
func (j *Pass) Abandon() {
	if j.done {
		return
	}
	j.done = true
	j.enc.EndEncoding()
	j.release()
}

// finish ends encoding, commits and waits; it reports the first encoding error or the command
// buffer's error. A Pass with an encoding error is not committed.
func (j *Pass) finish() error {
	j.done = true
	j.enc.EndEncoding()
	if j.err != nil {
		return j.err
	}
	j.cb.Commit()
	if werr := j.cb.Wait(); werr != nil {
		return fmt.Errorf("metal: %w: %w", op.ErrBackend, werr)
	}
	return nil
}

// release frees the Pass's own buffers (after the results were read back).
func (j *Pass) release() {
	for _, b := range j.bufs {
		b.Release()
	}
	j.bufs = nil
}

// fail records the first encoding error and returns the sticky one.
func (j *Pass) fail(err error) error {
	if j.err == nil {
		j.err = err
	}
	return j.err
}

// alloc returns a zeroed tensor of n 4-byte elements of dt in a buffer the Pass owns (at least
// 16 bytes, so empty tensors still bind): per-pass uploads of host bookkeeping.
func (j *Pass) alloc(dt op.DType, n int) *Tensor {
	if j.err != nil {
		return nil
	}
	buf, err := j.b.dev.NewBuffer(max(4*n, 16))
	if err != nil {
		j.err = fmt.Errorf("metal: buffer of %d bytes: %w: %w", 4*n, op.ErrOutOfMemory, err)
		return nil
	}
	j.bufs = append(j.bufs, buf)
	return &Tensor{buf: buf, n: n, dt: dt, b: j.b}
}

// tmp returns op-internal F32 scratch of n elements from the Pass's Arena (name keys it;
// contents unspecified); tmpI32 likewise for int32.
func (j *Pass) tmp(name string, n int) *Tensor { return j.tmpOf(name, op.F32, n) }

func (j *Pass) tmpI32(name string, n int) *Tensor { return j.tmpOf(name, op.I32, n) }

func (j *Pass) tmpOf(name string, dt op.DType, n int) *Tensor {
	if j.err != nil {
		return nil
	}
	t, err := j.a.tensor(name, dt, n)
	if err != nil {
		j.fail(err)
		return nil
	}
	return t
}

// dev returns t as a tensor of this backend, recording an error (and returning nil) for a host
// tensor or one of another backend; name identifies the argument in the error.
func (j *Pass) dev(name string, t op.Tensor) *Tensor {
	if !op.Present(t) {
		return nil
	}
	mt, ok := t.(*Tensor)
	if !ok || mt.b != j.b {
		j.fail(fmt.Errorf("metal: %w: %s is not a tensor of this backend (%T)", op.ErrInvalidArgument, name, t))
		return nil
	}
	return mt
}

// f32 uploads x into a new tensor of the Pass.
func (j *Pass) f32(x []float32) *Tensor {
	t := j.alloc(op.F32, len(x))
	if t != nil {
		copy(t.F32(), x)
	}
	return t
}

// i32 uploads x into a new tensor of the Pass.
func (j *Pass) i32(x []int32) *Tensor {
	t := j.alloc(op.I32, len(x))
	if t != nil {
		copy(t.I32(), x)
	}
	return t
}

// vec returns a small weight vector (norm weights, gates' biases) on the device from the Pass's
// Weights (uploaded on first use).
func (j *Pass) vec(x []float32) *Tensor {
	t, err := j.w.vec(x)
	if err != nil {
		j.fail(err)
		return nil
	}
	return t
}

// arg is one kernel argument: a buffer (bound at offset 0), a tensor (bound at its offset) or a
// params block (setBytes).
type arg any

// dispatch binds args to indices 0..len(args)-1 and dispatches pipeline p; variant names the
// kernel variant for the record. tgMem, when positive, sets threadgroup memory index 0.
func (j *Pass) dispatch(p mtl.Pipeline, variant string, groups, threads [3]int, tgMem int, args ...arg) {
	if j.err != nil {
		return
	}
	if groups[0]*groups[1]*groups[2] == 0 {
		return
	}
	if n := threads[0] * threads[1] * threads[2]; n > p.MaxTotalThreadsPerThreadgroup() {
		j.err = fmt.Errorf("metal: %s: %w: %d threads per threadgroup, pipeline allows %d",
			variant, op.ErrUnsupported, n, p.MaxTotalThreadsPerThreadgroup())
		return
	}
	if tot := tgMem + p.StaticThreadgroupMemoryLength(); tot > j.b.dev.MaxThreadgroupMemoryLength() {
		j.err = fmt.Errorf("metal: %s: %w: %d bytes of threadgroup memory, device allows %d",
			variant, op.ErrUnsupported, tot, j.b.dev.MaxThreadgroupMemoryLength())
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case mtl.Buffer:
			if v == nil {
				j.err = fmt.Errorf("metal: %s: argument %d is a nil buffer", variant, i)
				return
			}
		case *Tensor:
			if v == nil {
				j.err = fmt.Errorf("metal: %s: argument %d is a nil tensor", variant, i)
				return
			}
		case []byte:
		default:
			j.err = fmt.Errorf("metal: %s: argument %d has type %T", variant, i, a)
			return
		}
	}
	j.enc.SetPipeline(p)
	for i, a := range args {
		switch v := a.(type) {
		case mtl.Buffer:
			j.enc.SetBuffer(v, 0, i)
		case *Tensor:
			j.enc.SetBuffer(v.buf, v.off, i)
		case []byte:
			j.enc.SetBytes(v, i)
		}
	}
	if tgMem > 0 {
		j.enc.SetThreadgroupMemoryLength((tgMem+15)/16*16, 0)
	}
	j.enc.DispatchThreadgroups(groups, threads)
	j.stages = append(j.stages, j.stage)
	j.b.record(variant)
}
