package emu

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/stratakernels/strata/metal/mtl"
)

// pipeline is a kernel specialised with function constants.
type pipeline struct {
	lib      *library
	kernel   int
	name     string
	maxTh    int
	fcVal    [maxConstants]uint32
	fcSet    [maxConstants]uint8
	staticTG int
	released bool
}

func (p *pipeline) Name() string                       { return p.name }
func (p *pipeline) MaxTotalThreadsPerThreadgroup() int { return p.maxTh }
func (p *pipeline) ThreadExecutionWidth() int          { return 32 }
func (p *pipeline) StaticThreadgroupMemoryLength() int { return p.staticTG }

// Release implements mtl.Pipeline.
func (p *pipeline) Release() {
	d := p.lib.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if p.released {
		return
	}
	p.released = true
	d.count(pipelines, -1)
	p.lib.unref()
}

var constTypes = map[mtl.ConstantType][]string{
	mtl.Bool:  {"bool"},
	mtl.Int:   {"int", "short", "char", "int32_t", "int16_t", "int8_t"},
	mtl.UInt:  {"uint", "ushort", "uchar", "uint32_t", "uint16_t", "uint8_t", "unsigned int", "unsigned short", "unsigned char"},
	mtl.Float: {"float", "half"},
}

// Pipeline implements mtl.Library. It fails with mtl.ErrNoFunction for an unknown kernel, and
// with mtl.ErrCompile for a constant index outside [0, 65535], a constant given twice or with the
// wrong type, or a kernel whose threadgroup variables exceed 32 KiB. Constants at indices the
// library does not declare are ignored, as Metal ignores them. The pipeline's
// MaxTotalThreadsPerThreadgroup is the kernel's, capped at Options.MaxThreadsPerThreadgroup.
// A released library builds no pipeline (mtl.ErrCompile).
func (l *library) Pipeline(fn string, constants []mtl.Constant) (mtl.Pipeline, error) {
	l.dev.mu.Lock()
	released := l.released
	l.dev.mu.Unlock()
	if released {
		return nil, fmt.Errorf("emu: kernel %q: library released: %w", fn, mtl.ErrCompile)
	}
	p := &pipeline{lib: l, kernel: -1, name: fn}
	for i, k := range l.prog.Kernels {
		if k.Host == fn {
			p.kernel, p.maxTh, p.staticTG = i, k.MaxThreads, k.StaticTG
		}
	}
	if p.kernel < 0 {
		return nil, fmt.Errorf("emu: kernel %q: %w", fn, mtl.ErrNoFunction)
	}
	if p.maxTh < 1 || p.maxTh > 1024 {
		return nil, fmt.Errorf("emu: %s: max_total_threads_per_threadgroup is %d, outside [1, 1024]: %w", fn, p.maxTh, mtl.ErrCompile)
	}
	given := map[int]bool{}
	for _, c := range constants {
		if c.Index < 0 || c.Index > 65535 {
			return nil, fmt.Errorf("emu: %s: function constant index %d outside [0, 65535]: %w", fn, c.Index, mtl.ErrCompile)
		}
		if given[c.Index] {
			return nil, fmt.Errorf("emu: %s: function constant %d given twice: %w", fn, c.Index, mtl.ErrCompile)
		}
		given[c.Index] = true
		for _, decl := range l.prog.Constants {
			if decl.Index != c.Index {
				continue
			}
			ok := false
			for _, t := range constTypes[c.Type] {
				ok = ok || t == decl.Type
			}
			if !ok {
				return nil, fmt.Errorf("emu: %s: function constant %s is %s, given type %d: %w", fn, decl.Name, decl.Type, c.Type, mtl.ErrCompile)
			}
			p.fcVal[decl.Slot], p.fcSet[decl.Slot] = c.Value, 1
		}
	}
	if p.staticTG > ThreadgroupMemoryLimit {
		return nil, fmt.Errorf("emu: %s: threadgroup variables use %d bytes, over the %d-byte limit: %w",
			fn, p.staticTG, ThreadgroupMemoryLimit, mtl.ErrCompile)
	}
	if c := l.dev.opts.MaxThreadsPerThreadgroup; c > 0 {
		p.maxTh = min(p.maxTh, c)
	}
	l.dev.mu.Lock()
	l.refs++
	l.dev.mu.Unlock()
	l.dev.count(pipelines, 1)
	return p, nil
}

func (d *Device) newDesc(p *pipeline) *dispatchDesc {
	desc := &dispatchDesc{
		Seed:     d.opts.Seed,
		Kernel:   int32(p.kernel),
		Schedule: int32(d.opts.Schedule),
		Workers:  int32(d.opts.Threads),
		FCVal:    p.fcVal,
		FCSet:    p.fcSet,
		StaticTG: uint32(p.staticTG),
		TGLimit:  ThreadgroupMemoryLimit,
	}
	return desc
}

func (s *sharedObject) runDesc(d *dispatchDesc) error {
	if s.run(unsafe.Pointer(d)) != 0 {
		return errors.New(d.errText())
	}
	return nil
}

// NewCommandBuffer implements mtl.Device.
func (d *Device) NewCommandBuffer() (mtl.CommandBuffer, error) {
	d.count(commandBuffers, 1)
	return &commandBuffer{dev: d}, nil
}

type dispatchRec struct {
	p       *pipeline
	bufs    [maxBindings]*buffer
	offs    [maxBindings]int
	bytes   [maxBindings][]byte
	tglen   [maxBindings]uint32
	groups  [3]uint32
	threads [3]uint32
}

type commandBuffer struct {
	dev        *Device
	dispatches []dispatchRec
	times      []time.Duration // wall time of each dispatch run in this process
	err        error
	committed  bool
	released   bool
}

// Release implements mtl.CommandBuffer (an uncommitted one is abandoned: its dispatches never run).
func (c *commandBuffer) Release() {
	if !c.released {
		c.released = true
		c.dispatches = nil
		c.dev.count(commandBuffers, -1)
	}
}

// DispatchTimes is the wall time of each dispatch of a committed command buffer, in encoding
// order (nil in ASan mode, where the helper process runs them, or when one failed). The Metal
// backend reads it through an optional interface to time its ops per stage.
func (c *commandBuffer) DispatchTimes() []time.Duration {
	if !c.committed || c.err != nil || len(c.times) != len(c.dispatches) {
		return nil
	}
	return c.times
}

func (c *commandBuffer) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("emu: "+format+": %w", append(args, mtl.ErrExecution)...)
	}
}

// ComputeEncoder implements mtl.CommandBuffer.
func (c *commandBuffer) ComputeEncoder() (mtl.ComputeEncoder, error) {
	if c.released {
		return nil, fmt.Errorf("emu: command buffer released: %w", mtl.ErrExecution)
	}
	if c.committed {
		return nil, fmt.Errorf("emu: command buffer already committed: %w", mtl.ErrExecution)
	}
	return &encoder{cb: c}, nil
}

// Commit implements mtl.CommandBuffer: it runs the encoded dispatches in order, synchronously.
func (c *commandBuffer) Commit() {
	if c.committed {
		return
	}
	c.committed = true
	if c.released {
		c.fail("Commit after Release")
		return
	}
	if c.err != nil || len(c.dispatches) == 0 {
		return
	}
	if c.dev.opts.ASan {
		c.runASan()
		return
	}
	for i := range c.dispatches {
		if err := c.runInProcess(&c.dispatches[i]); err != nil {
			c.err = fmt.Errorf("emu: %w: %v", mtl.ErrExecution, err)
			return
		}
	}
}

// Wait implements mtl.CommandBuffer.
func (c *commandBuffer) Wait() error {
	if !c.committed {
		return fmt.Errorf("emu: Wait before Commit: %w", mtl.ErrExecution)
	}
	return c.err
}

func tgTotal(r *dispatchRec) int {
	n := (r.p.staticTG + 15) / 16 * 16
	for _, l := range r.tglen {
		n += int(l&^tgSet+15) / 16 * 16
	}
	return n
}

func (c *commandBuffer) record(r *dispatchRec, dt time.Duration) {
	d := c.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	key := r.p.lib.key + "/" + r.p.name
	s, ok := d.stats[key]
	if !ok {
		s = &KernelStats{Kernel: r.p.name, StaticThreadgroupMemory: r.p.staticTG}
		d.stats[key] = s
	}
	s.Dispatches++
	g := int64(r.groups[0]) * int64(r.groups[1]) * int64(r.groups[2])
	s.Threadgroups += g
	s.Threads += g * int64(r.threads[0]) * int64(r.threads[1]) * int64(r.threads[2])
	s.MaxThreadgroupMemory = max(s.MaxThreadgroupMemory, tgTotal(r))
	s.Seconds += dt.Seconds()
}

func (c *commandBuffer) runInProcess(r *dispatchRec) error {
	desc := c.dev.newDesc(r.p)
	desc.Groups, desc.Threads, desc.TGLen = r.groups, r.threads, r.tglen
	var arena []byte
	total := 0
	for _, b := range r.bytes {
		total += (len(b) + 15) / 16 * 16
	}
	if total > 0 {
		var err error
		arena, err = syscall.Mmap(-1, 0, total, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return err
		}
		defer syscall.Munmap(arena)
	}
	off := 0
	for i := range maxBindings {
		switch {
		case r.bytes[i] != nil:
			copy(arena[off:], r.bytes[i])
			desc.Buf[i] = uint64(uintptr(unsafe.Pointer(&arena[off])))
			desc.BufLen[i] = uint64(len(r.bytes[i]))
			off += (len(r.bytes[i]) + 15) / 16 * 16
		case r.bufs[i] != nil:
			b := r.bufs[i]
			if b.mem == nil {
				return fmt.Errorf("buffer(%d) was released", i)
			}
			desc.Buf[i] = uint64(uintptr(unsafe.Pointer(&b.mem[0]))) + uint64(r.offs[i])
			desc.BufLen[i] = uint64(len(b.mem) - r.offs[i])
		}
	}
	so := r.p.lib.so
	if so == nil {
		return fmt.Errorf("kernel %s: its library was unloaded (the device was closed)", r.p.name)
	}
	t0 := time.Now()
	err := so.runDesc(desc)
	dt := time.Since(t0)
	c.record(r, dt)
	c.times = append(c.times, dt)
	return err
}

// encoder records the binding state and appends a dispatch record per dispatch.
type encoder struct {
	cb    *commandBuffer
	state dispatchRec
	ended bool
}

func (e *encoder) check(index int, what string) bool {
	if e.ended {
		e.cb.fail("%s after EndEncoding", what)
		return false
	}
	if index < 0 || index >= maxBindings {
		e.cb.fail("%s index %d out of range [0, %d)", what, index, maxBindings)
		return false
	}
	return true
}

func (e *encoder) SetPipeline(p mtl.Pipeline) {
	pp, ok := p.(*pipeline)
	if !ok || pp == nil || pp.lib.dev != e.cb.dev {
		e.cb.fail("SetPipeline: pipeline of another device")
		return
	}
	if pp.released {
		e.cb.fail("SetPipeline: pipeline %s was released", pp.name)
		return
	}
	e.state.p = pp
}

func (e *encoder) SetBuffer(b mtl.Buffer, offset, index int) {
	if !e.check(index, "SetBuffer") {
		return
	}
	bb, ok := b.(*buffer)
	if !ok || bb == nil || bb.mem == nil {
		e.cb.fail("SetBuffer(%d): not a live buffer of this device", index)
		return
	}
	if offset < 0 || offset >= len(bb.mem) {
		e.cb.fail("SetBuffer(%d): offset %d outside a %d-byte buffer", index, offset, len(bb.mem))
		return
	}
	e.state.bufs[index], e.state.offs[index], e.state.bytes[index] = bb, offset, nil
}

func (e *encoder) SetBytes(data []byte, index int) {
	if !e.check(index, "SetBytes") {
		return
	}
	if len(data) == 0 || len(data) > 4096 {
		e.cb.fail("SetBytes(%d): %d bytes, Metal allows 1..4096", index, len(data))
		return
	}
	e.state.bytes[index], e.state.bufs[index] = append([]byte(nil), data...), nil
}

func (e *encoder) SetThreadgroupMemoryLength(length, index int) {
	if !e.check(index, "SetThreadgroupMemoryLength") {
		return
	}
	if length < 0 || length%16 != 0 || length > ThreadgroupMemoryLimit {
		e.cb.fail("SetThreadgroupMemoryLength(%d, %d): length must be a multiple of 16 in [0, %d]", length, index, ThreadgroupMemoryLimit)
		return
	}
	e.state.tglen[index] = uint32(length) | tgSet
}

// tgSet marks a dynamic threadgroup length as set (EMU_TG_SET): a kernel may take a
// [[threadgroup(n)]] argument whose length was set to 0 (ggml does), not one never set.
const tgSet = 1 << 31

func (e *encoder) DispatchThreadgroups(groups, threads [3]int) {
	if e.ended {
		e.cb.fail("DispatchThreadgroups after EndEncoding")
		return
	}
	if e.state.p == nil {
		e.cb.fail("DispatchThreadgroups without a pipeline")
		return
	}
	n := 1
	for a := range 3 {
		if groups[a] <= 0 || threads[a] <= 0 || groups[a] > 1<<31 {
			e.cb.fail("DispatchThreadgroups(%v, %v): counts must be positive", groups, threads)
			return
		}
		n *= threads[a]
		e.state.groups[a], e.state.threads[a] = uint32(groups[a]), uint32(threads[a])
	}
	if n > e.state.p.maxTh {
		e.cb.fail("kernel %s: %d threads per threadgroup, pipeline allows %d", e.state.p.name, n, e.state.p.maxTh)
		return
	}
	if t := tgTotal(&e.state); t > ThreadgroupMemoryLimit {
		e.cb.fail("kernel %s: threadgroup memory %d bytes (static %d + dynamic) over the %d-byte limit",
			e.state.p.name, t, e.state.p.staticTG, ThreadgroupMemoryLimit)
		return
	}
	e.cb.dispatches = append(e.cb.dispatches, e.state)
}

func (e *encoder) EndEncoding() { e.ended = true }
