package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/stratakernels/strata/kernels"
	"github.com/stratakernels/strata/metal/mtl"
)

// job is one command buffer with one compute encoder: the host wrappers upload their inputs,
// encode their dispatches in order, commit once and wait once.
type job struct {
	b    *Backend
	cb   mtl.CommandBuffer
	enc  mtl.ComputeEncoder
	bufs []mtl.Buffer
	err  error
}

func (b *Backend) begin() (*job, error) {
	cb, err := b.dev.NewCommandBuffer()
	if err != nil {
		return nil, fmt.Errorf("metal: command buffer: %w", err)
	}
	enc, err := cb.ComputeEncoder()
	if err != nil {
		return nil, fmt.Errorf("metal: compute encoder: %w", err)
	}
	return &job{b: b, cb: cb, enc: enc}, nil
}

// finish ends encoding, commits and waits; it reports the first encoding error or the command
// buffer's error.
func (j *job) finish() error {
	j.enc.EndEncoding()
	j.cb.Commit()
	werr := j.cb.Wait()
	if j.err != nil {
		return j.err
	}
	if werr != nil {
		return fmt.Errorf("metal: %w", werr)
	}
	return nil
}

// release frees the job's buffers (after the results were read back).
func (j *job) release() {
	for _, b := range j.bufs {
		b.Release()
	}
	j.bufs = nil
}

// alloc returns a zeroed buffer of n bytes (at least 16, so empty tensors still bind).
func (j *job) alloc(n int) mtl.Buffer {
	if j.err != nil {
		return nil
	}
	buf, err := j.b.dev.NewBuffer(max(n, 16))
	if err != nil {
		j.err = fmt.Errorf("metal: buffer of %d bytes: %w", n, err)
		return nil
	}
	j.bufs = append(j.bufs, buf)
	return buf
}

// f32 uploads x into a new buffer.
func (j *job) f32(x []float32) mtl.Buffer {
	buf := j.alloc(4 * len(x))
	if buf != nil {
		copy(f32view(buf, len(x)), x)
	}
	return buf
}

// i32 uploads x into a new buffer.
func (j *job) i32(x []int32) mtl.Buffer {
	buf := j.alloc(4 * len(x))
	if buf != nil && len(x) > 0 {
		copy(unsafe.Slice((*int32)(unsafe.Pointer(&buf.Contents()[0])), len(x)), x)
	}
	return buf
}

// u16 uploads x into a new buffer.
func (j *job) u16(x []uint16) mtl.Buffer {
	buf := j.alloc(2 * len(x))
	if buf != nil && len(x) > 0 {
		copy(unsafe.Slice((*uint16)(unsafe.Pointer(&buf.Contents()[0])), len(x)), x)
	}
	return buf
}

// f32view aliases the first n float32 of a buffer.
func f32view(buf mtl.Buffer, n int) []float32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&buf.Contents()[0])), n)
}

// i32view aliases the first n int32 of a buffer.
func i32view(buf mtl.Buffer, n int) []int32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&buf.Contents()[0])), n)
}

// arg is one kernel argument: a buffer (bound at offset 0) or a params block (setBytes).
type arg any

// dispatch binds args to indices 0..len(args)-1 and dispatches pipeline p; variant names the
// kernel variant for the record. tgMem, when positive, sets threadgroup memory index 0.
func (j *job) dispatch(p mtl.Pipeline, variant string, groups, threads [3]int, tgMem int, args ...arg) {
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
	j.enc.SetPipeline(p)
	for i, a := range args {
		switch v := a.(type) {
		case mtl.Buffer:
			j.enc.SetBuffer(v, 0, i)
		case []byte:
			j.enc.SetBytes(v, i)
		default:
			j.err = fmt.Errorf("metal: %s: argument %d has type %T", variant, i, a)
			return
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
