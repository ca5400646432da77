package metal

import (
	"fmt"
	"slices"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
	"github.com/stratakernels/strata/op"
)

// Pass is the work of one op.Pass: a prefill chunk encodes all its ops into one Pass over device
// tensors (Begin) and commits once. The ops' dispatches are recorded as they are encoded and
// handed to the device at Commit, which splits them into command buffers of at most the
// Backend's CommandBufferBudget (one compute encoder each), encodes, commits and waits for them
// inside one autorelease pool on one OS thread (mtl.AutoreleasePooler: the Objective-C objects
// Metal hands out during the command buffers' life are released when it ends, whichever
// goroutine or thread encoded the ops). Encoding errors are sticky: the first one is returned by
// every later op and by Commit.
type Pass struct {
	b     *Backend
	w     *Weights // device-resident weights of the model
	a     *Arena   // scratch of the session
	bufs  []mtl.Buffer
	cmds  []dispatchCmd
	err   error
	done  bool
	stage int
	// force names, per op, the kernel this Pass runs whatever Prefer and the capability defaults
	// say (the first-use self-check of a tensor-op variant compares two kernels this way).
	force map[string]string
	// routeStatus is moe_route's flag of non-finite logits ([2] uint32, see moe.metal), in
	// the session's scratch, reset by the first TopKRoute of the Pass and read after the
	// command buffer.
	routeStatus *Tensor
}

// dispatchCmd is one recorded dispatch: its pipeline, arguments (checked when recorded),
// dynamic threadgroup memory (index 0), grid and Stage tag.
type dispatchCmd struct {
	p               mtl.Pipeline
	args            []arg
	tgMem           int
	groups, threads [3]int
	stage           int
}

var _ op.Pass = (*Pass)(nil)

// Begin implements op.Backend: a Pass whose ops read their weights from w (this backend's
// NewWeights: uploaded on first use and kept for the next passes) and take their
// internal scratch from s (this backend's NewScratch). Encode ops with the Pass methods, then
// Commit once; Abandon drops an encoded Pass without running it (nothing it would write
// changes). Errors wrap op.ErrInvalidArgument (a store of another backend).
func (b *Backend) Begin(w op.Weights, s op.Scratch) (op.Pass, error) {
	return b.begin(w, s)
}

func (b *Backend) begin(w op.Weights, s op.Scratch) (*Pass, error) {
	mw, ok1 := w.(*Weights)
	ma, ok2 := s.(*Arena)
	if !ok1 || !ok2 || mw.b != b || ma.b != b {
		return nil, fmt.Errorf("metal: %w: weights or scratch of another backend", op.ErrInvalidArgument)
	}
	ma.releaseRetired()
	return &Pass{b: b, w: mw, a: ma}, nil
}

// Err is the first encoding error of the Pass (nil while it is fine).
func (j *Pass) Err() error { return j.err }

// Stage implements op.Pass: later dispatches are timed under stage.
func (j *Pass) Stage(stage int) { j.stage = stage }

// kernel is the kernel op runs in this Pass: the Pass's forced kernel, else Backend.Prefer's,
// else the capability default (tensorDefault: a Metal 4 tensor-op kernel on a GPU with matrix
// units, once its first-use self-check passed), else def.
func (j *Pass) kernel(opName, def string) string {
	if k, ok := j.force[opName]; ok {
		return k
	}
	if k, ok := j.b.preferredOK(opName); ok {
		return k
	}
	if k, ok := j.b.tensorDefault(opName); ok {
		return k
	}
	return def
}

// dispatchTimer is implemented by command buffers that time each dispatch (the emulator).
type dispatchTimer interface{ DispatchTimes() []time.Duration }

// Commit implements op.Pass: it splits the recorded dispatches into command buffers by the
// Backend's CommandBufferBudget, then creates, encodes and commits each in order and waits for
// them all, inside one autorelease pool (mtl.AutoreleasePooler); every command buffer is
// released, also one whose encoder could not be created (it is abandoned, and the ones after
// it are not made). Command buffers of one queue run in commit order, each seeing the writes of
// the ones before, so the results are those of one command buffer. It returns the first
// encoding error (then nothing runs) or the device's error (wrapping op.ErrBackend, and
// mtl.ErrExecution for a failed command buffer), or op.ErrInvalidArgument when a TopKRoute met
// NaN or infinite logits (see TopKRoute). Buffers the Pass allocated itself are released.
// Timing: per Stage where the device times each dispatch (the emulator: wall time per
// dispatch); else Total only, with PerStage false: the sum of the command buffers' GPU times
// where the device reports them (mtl.GPUTimer: GPUEndTime - GPUStartTime on Metal), else the
// wall time of the commits and waits. Each command buffer's GPU time is also kept for
// Backend.CommandBufferTimes. A Pass without dispatches runs nothing.
func (j *Pass) Commit() (op.Timing, error) {
	if j.done {
		return op.Timing{}, fmt.Errorf("metal: %w: pass already finished", op.ErrInvalidArgument)
	}
	j.done = true
	defer j.release()
	if j.err != nil {
		return op.Timing{}, j.err
	}
	if len(j.cmds) == 0 {
		return op.Timing{}, nil
	}
	var tm op.Timing
	var err error
	j.b.autoreleasePool(func() { tm, err = j.run() })
	return tm, err
}

// run is the command buffers' whole life: create, encode, commit, wait, time, release.
func (j *Pass) run() (op.Timing, error) {
	t0 := time.Now()
	var cbs []mtl.CommandBuffer // created; all but possibly the last committed
	committed := 0
	defer func() {
		for _, cb := range cbs {
			cb.Release()
		}
	}()
	var err error
	for _, part := range j.b.split(j.cmds) {
		cb, cerr := j.b.dev.NewCommandBuffer()
		if cerr != nil {
			err = fmt.Errorf("metal: command buffer: %w: %w", op.ErrBackend, cerr)
			break
		}
		cbs = append(cbs, cb)
		enc, eerr := cb.ComputeEncoder()
		if eerr != nil {
			err = fmt.Errorf("metal: compute encoder: %w: %w", op.ErrBackend, eerr)
			break
		}
		for i := range part {
			encodeCmd(enc, &part[i])
		}
		enc.EndEncoding()
		cb.Commit()
		committed++
	}
	// A committed command buffer is waited for before it is released, whatever failed.
	for _, cb := range cbs[:committed] {
		if werr := cb.Wait(); werr != nil && err == nil {
			err = fmt.Errorf("metal: %w: %w", op.ErrBackend, werr)
		}
	}
	if err != nil {
		return op.Timing{}, err
	}
	if err := j.routeError(); err != nil {
		return op.Timing{}, err
	}
	tm := op.Timing{Total: time.Since(t0)}
	var times []time.Duration
	perDispatch := true
	var gpu time.Duration
	gpuTimes := make([]time.Duration, 0, len(cbs))
	for _, cb := range cbs {
		dt, ok := cb.(dispatchTimer)
		perDispatch = perDispatch && ok
		if ok {
			times = append(times, dt.DispatchTimes()...)
		}
		var g time.Duration
		if gt, ok := cb.(mtl.GPUTimer); ok {
			g = gt.GPUTime()
		}
		gpuTimes = append(gpuTimes, g)
		gpu += g
	}
	j.b.recordCommandBuffers(gpuTimes)
	if perDispatch && len(times) == len(j.cmds) {
		tm.PerStage, tm.Total = true, 0
		for i, d := range times {
			st := j.cmds[i].stage
			for len(tm.Stage) <= st {
				tm.Stage = append(tm.Stage, 0)
			}
			tm.Stage[st] += d
			tm.Total += d
		}
		return tm, nil
	}
	if !slices.Contains(gpuTimes, 0) {
		tm.Total = gpu
	}
	return tm, nil
}

// encodeCmd binds a recorded dispatch's arguments to indices 0..len(args)-1 and dispatches it.
func encodeCmd(enc mtl.ComputeEncoder, c *dispatchCmd) {
	enc.SetPipeline(c.p)
	for i, a := range c.args {
		switch v := a.(type) {
		case mtl.Buffer:
			enc.SetBuffer(v, 0, i)
		case *Tensor:
			enc.SetBuffer(v.buf, v.off, i)
		case []byte:
			enc.SetBytes(v, i)
		}
	}
	if c.tgMem > 0 {
		enc.SetThreadgroupMemoryLength((c.tgMem+15)/16*16, 0)
	}
	enc.DispatchThreadgroups(c.groups, c.threads)
}

// Abandon ends the Pass without committing: the recorded work never reaches the device.
func (j *Pass) Abandon() {
	if j.done {
		return
	}
	j.done = true
	j.release()
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
	buf, err := j.buffer(4 * n)
	if err != nil {
		j.err = err
		return nil
	}
	return &Tensor{buf: buf, n: n, dt: dt, b: j.b}
}

// buffer allocates a buffer of n bytes (at least 16) that the Pass owns and releases when it
// ends. Errors wrap op.ErrOutOfMemory.
func (j *Pass) buffer(n int) (mtl.Buffer, error) {
	buf, err := j.b.dev.NewBuffer(max(n, 16))
	if err != nil {
		return nil, fmt.Errorf("metal: buffer of %d bytes: %w: %w", n, op.ErrOutOfMemory, err)
	}
	j.bufs = append(j.bufs, buf)
	return buf, nil
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

// dispatch records a dispatch of pipeline p with args bound to indices 0..len(args)-1 (encoded
// at Commit); variant names the kernel variant for the record. tgMem, when positive, sets
// threadgroup memory index 0. The arguments and the limits are checked here.
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
	j.cmds = append(j.cmds, dispatchCmd{p: p, args: args, tgMem: tgMem, groups: groups, threads: threads, stage: j.stage})
	j.b.record(variant, p, tgMem)
}
