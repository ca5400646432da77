package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/mtl"
)

// Pass is one command buffer with one compute encoder. The host-slice wrappers open a Pass per
// call (upload, encode, commit, wait, read back); a prefill chunk encodes all its ops into one
// Pass over device tensors (NewPass), commits once and waits once. Encoding errors are sticky:
// the first one is returned by every later op and by Commit.
type Pass struct {
	b    *Backend
	cb   mtl.CommandBuffer
	enc  mtl.ComputeEncoder
	w    *Weights // device-resident weights; nil: weights are uploaded into bufs per Pass
	a    *Arena   // scratch of a prefill; nil: scratch is allocated per Pass
	bufs []mtl.Buffer
	err  error
	done bool
}

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

// NewPass starts one command buffer whose ops read their weights from w (uploaded on first use
// and kept for the next passes) and take their internal scratch from a. Encode ops with the Pass methods, then Commit once; Abandon
// drops an encoded Pass without running it (nothing it would write changes).
// Errors wrap the device's errors.
func (b *Backend) NewPass(w *Weights, a *Arena) (*Pass, error) {
	if w == nil || w.b != b || a == nil || a.b != b {
		return nil, fmt.Errorf("metal: %w: weights or arena of another backend", kernels.ErrArg)
	}
	j, err := b.begin()
	if err != nil {
		return nil, err
	}
	j.w, j.a = w, a
	return j, nil
}

// Err is the first encoding error of the Pass (nil while it is fine).
func (j *Pass) Err() error { return j.err }

// Commit ends encoding, commits the command buffer and waits for it; it returns the first
// encoding error (then nothing runs) or the command buffer's error (wrapping mtl.ErrExecution).
// Buffers the Pass allocated itself are released.
func (j *Pass) Commit() error {
	if j.done {
		return fmt.Errorf("metal: %w: pass already finished", kernels.ErrArg)
	}
	defer j.release()
	return j.finish()
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
		return fmt.Errorf("metal: %w", werr)
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

// alloc returns a zeroed tensor of n 4-byte elements in a buffer the Pass owns (at least 16
// bytes, so empty tensors still bind).
func (j *Pass) alloc(n int) *Tensor {
	if j.err != nil {
		return nil
	}
	buf, err := j.b.dev.NewBuffer(max(4*n, 16))
	if err != nil {
		j.err = fmt.Errorf("metal: buffer of %d bytes: %w", 4*n, err)
		return nil
	}
	j.bufs = append(j.bufs, buf)
	return &Tensor{buf: buf, n: n}
}

// tmp returns op-internal scratch of n elements: from the Pass's Arena when it has one (name
// keys it; contents unspecified), else a new zeroed tensor of the Pass.
func (j *Pass) tmp(name string, n int) *Tensor {
	if j.err != nil {
		return nil
	}
	if j.a == nil {
		return j.alloc(n)
	}
	t, err := j.a.Tensor(name, n)
	if err != nil {
		j.fail(err)
		return nil
	}
	return t
}

// f32 uploads x into a new tensor.
func (j *Pass) f32(x []float32) *Tensor {
	t := j.alloc(len(x))
	if t != nil {
		copy(t.F32(), x)
	}
	return t
}

// i32 uploads x into a new tensor.
func (j *Pass) i32(x []int32) *Tensor {
	t := j.alloc(len(x))
	if t != nil {
		copy(t.I32(), x)
	}
	return t
}

// u16 uploads x into a new buffer.
func (j *Pass) u16(x []uint16) mtl.Buffer {
	if j.err != nil {
		return nil
	}
	buf, err := j.b.dev.NewBuffer(max(2*len(x), 16))
	if err != nil {
		j.err = fmt.Errorf("metal: buffer of %d bytes: %w", 2*len(x), err)
		return nil
	}
	j.bufs = append(j.bufs, buf)
	if len(x) > 0 {
		copy(unsafe.Slice((*uint16)(unsafe.Pointer(&buf.Contents()[0])), len(x)), x)
	}
	return buf
}

// vec returns a small weight vector (norm weights, gates' biases) on the device: from the
// Pass's Weights when it has them, else uploaded for this Pass.
func (j *Pass) vec(x []float32) *Tensor {
	if j.w == nil {
		return j.f32(x)
	}
	t, err := j.w.vec(x)
	if err != nil {
		j.fail(err)
		return nil
	}
	return t
}

// f32view aliases the first n float32 of a tensor.
func f32view(t *Tensor, n int) []float32 { return t.F32()[:n] }

// i32view aliases the first n int32 of a tensor.
func i32view(t *Tensor, n int) []int32 { return t.I32()[:n] }

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
			variant, kernels.ErrArg, n, p.MaxTotalThreadsPerThreadgroup())
		return
	}
	if tot := tgMem + p.StaticThreadgroupMemoryLength(); tot > j.b.dev.MaxThreadgroupMemoryLength() {
		j.err = fmt.Errorf("metal: %s: %w: %d bytes of threadgroup memory, device allows %d",
			variant, kernels.ErrArg, tot, j.b.dev.MaxThreadgroupMemoryLength())
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
	j.b.record(variant)
}

// params packs a kernel's params struct: every field is 4 bytes (int and uint32 as 32-bit
// integers, float32 as IEEE bits, bool as 0/1), in declaration order, matching the MSL structs
// of metal/kernels. Callers range-check ints with guard32 first.
func params(fields ...any) []byte {
	out := make([]byte, 0, 4*len(fields))
	for _, f := range fields {
		var u uint32
		switch v := f.(type) {
		case int:
			u = uint32(int32(v))
		case int32:
			u = uint32(v)
		case uint32:
			u = v
		case float32:
			u = math.Float32bits(v)
		case bool:
			if v {
				u = 1
			}
		default:
			panic(fmt.Sprintf("metal: params field of type %T", f))
		}
		out = binary.LittleEndian.AppendUint32(out, u)
	}
	return out
}
