package metal

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/stratakernels/strata/metal/mtl"
)

// The Metal framework through purego's Objective-C runtime (no cgo). Objects from new*/alloc
// (the device, queue, buffers, libraries, pipeline states) are owned and released by their
// Release or Close; command buffers and encoders (autoreleased by Metal) are retained while in
// use and released by the command buffer's Release. A Go thread has no autorelease pool: every
// method that sends an Objective-C message runs inside one (autoreleasePool, on a locked OS
// thread), whatever it sends (Metal may autorelease inside any call), and the Metal backend runs
// each command buffer's whole life inside one AutoreleasePool call. The frameworks are dlopened
// on a locked OS thread, so that a failure's dlerror text is read on the thread that set it.

// MTLDataType values of function constants (MTLArgument.h).
const (
	mtlDataTypeFloat = 3
	mtlDataTypeInt   = 29
	mtlDataTypeUInt  = 33
	mtlDataTypeBool  = 53
)

// mtlCommandBufferStatusError is MTLCommandBufferStatusError.
const mtlCommandBufferStatusError = 5

// MTLCounterSamplingPoint values (MTLCounters.h).
const (
	mtlCounterSamplingAtStageBoundary    = 0
	mtlCounterSamplingAtDispatchBoundary = 2
)

// mtlSize is MTLSize (three NSUInteger), passed by value.
type mtlSize struct{ Width, Height, Depth uint }

var (
	loadOnce sync.Once
	loadErr  error
	createFn func() objc.ID
	poolPush func() uintptr
	poolPop  func(uintptr)

	sel = struct {
		alloc, init, release, retain                                    objc.SEL
		stringWithUTF8String, utf8String, localizedDescription, name    objc.SEL
		newCommandQueue, newBuffer, contents, length                    objc.SEL
		newLibrary, newFunction, newPipeline                            objc.SEL
		setConstantValue, maxTotalThreads, execWidth, staticTGMem       objc.SEL
		maxTGMem, commandBuffer, computeEncoder, setPipeline            objc.SEL
		setBuffer, setBytes, setTGMem, dispatch, endEncoding            objc.SEL
		commit, waitUntilCompleted, status, errorSel, newCompileOptions objc.SEL
		setLanguageVersion, setMathMode, setMathFunctions, setFastMath  objc.SEL
		respondsToSelector, supportsFamily, gpuStartTime, gpuEndTime    objc.SEL
		processInfo, osVersionString, supportsCounterSampling           objc.SEL
		hasUnifiedMemory, recommendedMaxWorkingSet, code, domain        objc.SEL
	}{}
)

// dlopen is purego.Dlopen on one locked OS thread: purego reads dlerror after a failure, and
// dlerror's message belongs to the thread that failed; a goroutine moved to another thread in
// between (a dlopen that searches the disk is a long foreign call) would report an empty reason.
// internal/blas opens its libraries the same way.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil && err.Error() == "" {
		err = fmt.Errorf("dlopen %s failed without a reason", path)
	}
	return h, err
}

func loadMetal() error {
	loadOnce.Do(func() {
		if _, err := dlopen("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"); err != nil {
			loadErr = fmt.Errorf("metal: loading CoreGraphics: %w", err)
			return
		}
		lib, err := dlopen("/System/Library/Frameworks/Metal.framework/Metal")
		if err != nil {
			loadErr = fmt.Errorf("metal: loading Metal.framework: %w", err)
			return
		}
		purego.RegisterLibFunc(&createFn, lib, "MTLCreateSystemDefaultDevice")
		objcLib, err := dlopen("/usr/lib/libobjc.A.dylib")
		if err != nil {
			loadErr = fmt.Errorf("metal: loading libobjc: %w", err)
			return
		}
		purego.RegisterLibFunc(&poolPush, objcLib, "objc_autoreleasePoolPush")
		purego.RegisterLibFunc(&poolPop, objcLib, "objc_autoreleasePoolPop")
		r := objc.RegisterName
		sel.alloc, sel.init, sel.release, sel.retain = r("alloc"), r("init"), r("release"), r("retain")
		sel.stringWithUTF8String, sel.utf8String = r("stringWithUTF8String:"), r("UTF8String")
		sel.localizedDescription, sel.name = r("localizedDescription"), r("name")
		sel.newCommandQueue, sel.newBuffer = r("newCommandQueue"), r("newBufferWithLength:options:")
		sel.contents, sel.length = r("contents"), r("length")
		sel.newLibrary = r("newLibraryWithSource:options:error:")
		sel.newFunction = r("newFunctionWithName:constantValues:error:")
		sel.newPipeline = r("newComputePipelineStateWithFunction:error:")
		sel.setConstantValue = r("setConstantValue:type:atIndex:")
		sel.maxTotalThreads, sel.execWidth = r("maxTotalThreadsPerThreadgroup"), r("threadExecutionWidth")
		sel.staticTGMem, sel.maxTGMem = r("staticThreadgroupMemoryLength"), r("maxThreadgroupMemoryLength")
		sel.commandBuffer, sel.computeEncoder = r("commandBuffer"), r("computeCommandEncoder")
		sel.setPipeline, sel.setBuffer = r("setComputePipelineState:"), r("setBuffer:offset:atIndex:")
		sel.setBytes, sel.setTGMem = r("setBytes:length:atIndex:"), r("setThreadgroupMemoryLength:atIndex:")
		sel.dispatch, sel.endEncoding = r("dispatchThreadgroups:threadsPerThreadgroup:"), r("endEncoding")
		sel.commit, sel.waitUntilCompleted = r("commit"), r("waitUntilCompleted")
		sel.status, sel.errorSel = r("status"), r("error")
		sel.newCompileOptions = r("new")
		sel.setLanguageVersion, sel.setMathMode = r("setLanguageVersion:"), r("setMathMode:")
		sel.setMathFunctions, sel.setFastMath = r("setMathFloatingPointFunctions:"), r("setFastMathEnabled:")
		sel.respondsToSelector, sel.supportsFamily = r("respondsToSelector:"), r("supportsFamily:")
		sel.gpuStartTime, sel.gpuEndTime = r("GPUStartTime"), r("GPUEndTime")
		sel.processInfo, sel.osVersionString = r("processInfo"), r("operatingSystemVersionString")
		sel.supportsCounterSampling = r("supportsCounterSampling:")
		sel.hasUnifiedMemory, sel.recommendedMaxWorkingSet = r("hasUnifiedMemory"), r("recommendedMaxWorkingSetSize")
		sel.code, sel.domain = r("code"), r("domain")
	})
	return loadErr
}

// autoreleasePool runs fn inside an Objective-C autorelease pool on one OS thread (pools are
// per thread: the goroutine must not move between push and pop). Pools nest.
func autoreleasePool(fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tok := poolPush()
	defer poolPop(tok)
	fn()
}

// nsString returns an autoreleased NSString holding s.
func nsString(s string) objc.ID {
	return objc.ID(objc.GetClass("NSString")).Send(sel.stringWithUTF8String, s)
}

// goString copies an NSString.
func goString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	return objc.Send[string](ns, sel.utf8String)
}

// errorText is the localizedDescription of an NSError (empty for nil).
func errorText(nserr objc.ID) string {
	if nserr == 0 {
		return ""
	}
	return goString(nserr.Send(sel.localizedDescription))
}

// SystemDevice opens the system default Metal device (MTLCreateSystemDefaultDevice) and its
// command queue. Errors: no Metal framework or no GPU.
func SystemDevice() (mtl.Device, error) {
	if err := loadMetal(); err != nil {
		return nil, err
	}
	var dev, q objc.ID
	autoreleasePool(func() {
		if dev = createFn(); dev == 0 {
			return
		}
		if q = dev.Send(sel.newCommandQueue); q == 0 {
			dev.Send(sel.release)
		}
	})
	if dev == 0 {
		return nil, fmt.Errorf("metal: MTLCreateSystemDefaultDevice returned no device")
	}
	if q == 0 {
		return nil, fmt.Errorf("metal: newCommandQueue failed")
	}
	return &sysDevice{dev: dev, queue: q}, nil
}

type sysDevice struct {
	dev, queue objc.ID
	// live counts the libraries, pipelines, buffers and command buffers not yet released.
	libraries, pipelines, buffers, commandBuffers atomic.Int64
}

// Live implements mtl.LiveCounter.
func (d *sysDevice) Live() mtl.Live {
	return mtl.Live{Libraries: d.libraries.Load(), Pipelines: d.pipelines.Load(), Buffers: d.buffers.Load(), CommandBuffers: d.commandBuffers.Load()}
}

// AutoreleasePool implements mtl.AutoreleasePooler.
func (d *sysDevice) AutoreleasePool(fn func()) { autoreleasePool(fn) }

func (d *sysDevice) Name() string {
	var name string
	autoreleasePool(func() { name = goString(d.dev.Send(sel.name)) })
	return name
}

// SupportsFamily implements mtl.FamilyReporter (MTLDevice supportsFamily:).
func (d *sysDevice) SupportsFamily(f mtl.GPUFamily) bool {
	var ok bool
	autoreleasePool(func() { ok = objc.Send[bool](d.dev, sel.supportsFamily, int(f)) })
	return ok
}

// Describe implements mtl.Describer: macOS version, the Apple and Metal GPU families the device
// supports, unified memory, the recommended working set, and where it can sample counters
// (per-stage GPU timing needs counter sampling; strata reads only the command buffer's
// GPUStartTime..GPUEndTime).
func (d *sysDevice) Describe() [][2]string {
	var out [][2]string
	autoreleasePool(func() {
		info := objc.ID(objc.GetClass("NSProcessInfo")).Send(sel.processInfo)
		out = append(out, [2]string{"macOS", goString(info.Send(sel.osVersionString))})
		var fams []string
		for f := mtl.FamilyApple7; f <= mtl.FamilyApple10; f++ {
			if d.SupportsFamily(f) {
				fams = append(fams, f.String())
			}
		}
		for _, f := range []mtl.GPUFamily{mtl.FamilyMetal3, mtl.FamilyMetal4} {
			if d.SupportsFamily(f) {
				fams = append(fams, f.String())
			}
		}
		out = append(out, [2]string{"GPU families", strings.Join(fams, " ")})
		out = append(out, [2]string{"unified memory", fmt.Sprint(objc.Send[bool](d.dev, sel.hasUnifiedMemory))})
		out = append(out, [2]string{"recommended working set", fmt.Sprintf("%d MiB", objc.Send[uint64](d.dev, sel.recommendedMaxWorkingSet)>>20)})
		sampling := "none"
		if objc.Send[bool](d.dev, sel.respondsToSelector, sel.supportsCounterSampling) {
			var pts []string
			if objc.Send[bool](d.dev, sel.supportsCounterSampling, uint(mtlCounterSamplingAtStageBoundary)) {
				pts = append(pts, "stage boundary")
			}
			if objc.Send[bool](d.dev, sel.supportsCounterSampling, uint(mtlCounterSamplingAtDispatchBoundary)) {
				pts = append(pts, "dispatch boundary")
			}
			if len(pts) > 0 {
				sampling = strings.Join(pts, ", ")
			}
		}
		out = append(out, [2]string{"counter sampling", sampling})
	})
	return out
}

func (d *sysDevice) MaxThreadgroupMemoryLength() int {
	var n uint
	autoreleasePool(func() { n = objc.Send[uint](d.dev, sel.maxTGMem) })
	return int(n)
}

func (d *sysDevice) NewBuffer(length int) (mtl.Buffer, error) {
	if length <= 0 {
		return nil, fmt.Errorf("metal: buffer length %d", length)
	}
	var buf objc.ID
	var p unsafe.Pointer
	autoreleasePool(func() {
		// MTLResourceStorageModeShared | MTLResourceCPUCacheModeDefaultCache = 0.
		if buf = d.dev.Send(sel.newBuffer, uint(length), uint(0)); buf != 0 {
			p = objc.Send[unsafe.Pointer](buf, sel.contents)
		}
	})
	if buf == 0 {
		return nil, fmt.Errorf("metal: newBufferWithLength:%d failed", length)
	}
	mem := unsafe.Slice((*byte)(p), length)
	clear(mem)
	d.buffers.Add(1)
	return &sysBuffer{dev: d, id: buf, mem: mem}, nil
}

// NewLibrary implements mtl.Device: newLibraryWithSource:options:error: with MTLCompileOptions
// set from opts: languageVersion, mathMode (macOS 15; on older systems fastMathEnabled, on for
// MathFast only) and mathFloatingPointFunctions (macOS 15; older systems have no choice).
func (d *sysDevice) NewLibrary(name, source string, opts mtl.CompileOptions) (mtl.Library, error) {
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var lib mtl.Library
	var err error
	autoreleasePool(func() {
		var nserr objc.ID
		o := objc.ID(objc.GetClass("MTLCompileOptions")).Send(sel.newCompileOptions)
		if o == 0 {
			err = fmt.Errorf("%s: MTLCompileOptions new failed: %w", name, mtl.ErrCompile)
			return
		}
		defer o.Send(sel.release)
		o.Send(sel.setLanguageVersion, uint(opts.LanguageVersion))
		if objc.Send[bool](o, sel.respondsToSelector, sel.setMathMode) {
			o.Send(sel.setMathMode, int(opts.MathMode))
		} else {
			o.Send(sel.setFastMath, opts.MathMode == mtl.MathFast)
		}
		if objc.Send[bool](o, sel.respondsToSelector, sel.setMathFunctions) {
			fns := 0 // MTLMathFloatingPointFunctionsFast
			if opts.PreciseFunctions {
				fns = 1 // MTLMathFloatingPointFunctionsPrecise
			}
			o.Send(sel.setMathFunctions, fns)
		}
		l := d.dev.Send(sel.newLibrary, nsString(source), o, unsafe.Pointer(&nserr))
		runtime.KeepAlive(&nserr)
		if l == 0 {
			err = fmt.Errorf("%s (%v): %s: %w", name, opts, errorText(nserr), mtl.ErrCompile)
			return
		}
		lib = &sysLibrary{dev: d, lib: l, name: name}
		d.libraries.Add(1)
	})
	return lib, err
}

func (d *sysDevice) NewCommandBuffer() (mtl.CommandBuffer, error) {
	var cb objc.ID
	autoreleasePool(func() {
		if cb = d.queue.Send(sel.commandBuffer); cb != 0 {
			cb.Send(sel.retain)
		}
	})
	if cb == 0 {
		return nil, fmt.Errorf("metal: commandBuffer failed: %w", mtl.ErrExecution)
	}
	d.commandBuffers.Add(1)
	return &sysCommandBuffer{dev: d, cb: cb}, nil
}

// Close implements mtl.Device: the queue and the device are released (the device lives on
// while a library, pipeline, buffer or command buffer not yet released holds it).
func (d *sysDevice) Close() error {
	if d.dev == 0 {
		return nil
	}
	autoreleasePool(func() {
		d.queue.Send(sel.release)
		d.dev.Send(sel.release)
	})
	d.queue, d.dev = 0, 0
	return nil
}

type sysBuffer struct {
	dev *sysDevice
	id  objc.ID
	mem []byte
}

func (b *sysBuffer) Contents() []byte { return b.mem }
func (b *sysBuffer) Length() int      { return len(b.mem) }
func (b *sysBuffer) Release() {
	if b.id != 0 {
		autoreleasePool(func() { b.id.Send(sel.release) })
		b.id, b.mem = 0, nil
		b.dev.buffers.Add(-1)
	}
}

type sysLibrary struct {
	dev  *sysDevice
	lib  objc.ID
	name string
}

// Release implements mtl.Library.
func (l *sysLibrary) Release() {
	if l.lib != 0 {
		autoreleasePool(func() { l.lib.Send(sel.release) })
		l.lib = 0
		l.dev.libraries.Add(-1)
	}
}

// Pipeline implements mtl.Library (inside an autorelease pool: the function name and the errors
// are autoreleased).
func (l *sysLibrary) Pipeline(fn string, constants []mtl.Constant) (mtl.Pipeline, error) {
	var p mtl.Pipeline
	var err error
	autoreleasePool(func() { p, err = l.pipeline(fn, constants) })
	return p, err
}

func (l *sysLibrary) pipeline(fn string, constants []mtl.Constant) (mtl.Pipeline, error) {
	vals := objc.ID(objc.GetClass("MTLFunctionConstantValues")).Send(sel.alloc).Send(sel.init)
	defer vals.Send(sel.release)
	for _, c := range constants {
		v := c.Value
		var typ uint
		switch c.Type {
		case mtl.Bool:
			typ = mtlDataTypeBool
			b := uint8(0)
			if v != 0 {
				b = 1
			}
			vals.Send(sel.setConstantValue, unsafe.Pointer(&b), typ, uint(c.Index))
			runtime.KeepAlive(&b)
			continue
		case mtl.Int:
			typ = mtlDataTypeInt
		case mtl.UInt:
			typ = mtlDataTypeUInt
		case mtl.Float:
			typ = mtlDataTypeFloat
		default:
			return nil, fmt.Errorf("%s: constant %d has unknown type %d: %w", fn, c.Index, c.Type, mtl.ErrCompile)
		}
		vals.Send(sel.setConstantValue, unsafe.Pointer(&v), typ, uint(c.Index))
		runtime.KeepAlive(&v)
	}
	var nserr objc.ID
	f := l.lib.Send(sel.newFunction, nsString(fn), vals, unsafe.Pointer(&nserr))
	runtime.KeepAlive(&nserr)
	if f == 0 {
		var domain string
		code := -1
		if nserr != 0 {
			domain, code = goString(nserr.Send(sel.domain)), objc.Send[int](nserr, sel.code)
		}
		return nil, fmt.Errorf("%s in %s: %s (%s code %d): %w", fn, l.name, errorText(nserr), domain, code, functionErrorKind(domain, code))
	}
	defer f.Send(sel.release)
	nserr = 0
	ps := l.dev.dev.Send(sel.newPipeline, f, unsafe.Pointer(&nserr))
	runtime.KeepAlive(&nserr)
	if ps == 0 {
		return nil, fmt.Errorf("%s in %s: %s: %w", fn, l.name, errorText(nserr), mtl.ErrCompile)
	}
	l.dev.pipelines.Add(1)
	return &sysPipeline{dev: l.dev, id: ps, name: fn}, nil
}

type sysPipeline struct {
	dev  *sysDevice
	id   objc.ID
	name string
}

func (p *sysPipeline) Name() string { return p.name }

// property reads one NSUInteger property of the pipeline state.
func (p *sysPipeline) property(s objc.SEL) int {
	var n uint
	autoreleasePool(func() { n = objc.Send[uint](p.id, s) })
	return int(n)
}

func (p *sysPipeline) MaxTotalThreadsPerThreadgroup() int { return p.property(sel.maxTotalThreads) }
func (p *sysPipeline) ThreadExecutionWidth() int          { return p.property(sel.execWidth) }
func (p *sysPipeline) StaticThreadgroupMemoryLength() int { return p.property(sel.staticTGMem) }

// Release implements mtl.Pipeline.
func (p *sysPipeline) Release() {
	if p.id != 0 {
		autoreleasePool(func() { p.id.Send(sel.release) })
		p.id = 0
		p.dev.pipelines.Add(-1)
	}
}

type sysCommandBuffer struct {
	dev     *sysDevice
	cb      objc.ID
	encs    []objc.ID
	gpuTime time.Duration
}

func (c *sysCommandBuffer) ComputeEncoder() (mtl.ComputeEncoder, error) {
	var enc objc.ID
	autoreleasePool(func() {
		if enc = c.cb.Send(sel.computeEncoder); enc != 0 {
			enc.Send(sel.retain)
		}
	})
	if enc == 0 {
		return nil, fmt.Errorf("metal: computeCommandEncoder failed: %w", mtl.ErrExecution)
	}
	c.encs = append(c.encs, enc)
	return &sysEncoder{id: enc}, nil
}

func (c *sysCommandBuffer) Commit() { autoreleasePool(func() { c.cb.Send(sel.commit) }) }

// Wait implements mtl.CommandBuffer: waitUntilCompleted, the status and error, the GPU time
// (GPUEndTime - GPUStartTime).
func (c *sysCommandBuffer) Wait() error {
	var err error
	autoreleasePool(func() {
		c.cb.Send(sel.waitUntilCompleted)
		if st := objc.Send[uint](c.cb, sel.status); st == mtlCommandBufferStatusError {
			err = fmt.Errorf("metal: %s: %w", errorText(c.cb.Send(sel.errorSel)), mtl.ErrExecution)
		} else {
			start, end := objc.Send[float64](c.cb, sel.gpuStartTime), objc.Send[float64](c.cb, sel.gpuEndTime)
			if end > start {
				c.gpuTime = time.Duration((end - start) * float64(time.Second))
			}
		}
	})
	return err
}

// Release implements mtl.CommandBuffer: the encoders and the command buffer are released (an
// uncommitted command buffer is abandoned: Metal drops its work).
func (c *sysCommandBuffer) Release() {
	if c.cb == 0 {
		return
	}
	autoreleasePool(func() {
		for _, e := range c.encs {
			e.Send(sel.release)
		}
		c.cb.Send(sel.release)
	})
	c.encs, c.cb = nil, 0
	c.dev.commandBuffers.Add(-1)
}

// GPUTime implements mtl.GPUTimer: the command buffer's GPUEndTime - GPUStartTime (0 before
// Wait, or after a failure).
func (c *sysCommandBuffer) GPUTime() time.Duration { return c.gpuTime }

type sysEncoder struct{ id objc.ID }

// The encoder's methods run inside an autorelease pool each; the Metal backend calls them inside
// the command buffer's pool, where these nest.

func (e *sysEncoder) SetPipeline(p mtl.Pipeline) {
	autoreleasePool(func() { e.id.Send(sel.setPipeline, p.(*sysPipeline).id) })
}

func (e *sysEncoder) SetBuffer(b mtl.Buffer, offset, index int) {
	autoreleasePool(func() { e.id.Send(sel.setBuffer, b.(*sysBuffer).id, uint(offset), uint(index)) })
}

func (e *sysEncoder) SetBytes(data []byte, index int) {
	if len(data) == 0 {
		return
	}
	autoreleasePool(func() { e.id.Send(sel.setBytes, unsafe.Pointer(&data[0]), uint(len(data)), uint(index)) })
	runtime.KeepAlive(data)
}

func (e *sysEncoder) SetThreadgroupMemoryLength(length, index int) {
	autoreleasePool(func() { e.id.Send(sel.setTGMem, uint(length), uint(index)) })
}

func (e *sysEncoder) DispatchThreadgroups(groups, threads [3]int) {
	g := mtlSize{uint(groups[0]), uint(groups[1]), uint(groups[2])}
	t := mtlSize{uint(threads[0]), uint(threads[1]), uint(threads[2])}
	autoreleasePool(func() { e.id.Send(sel.dispatch, g, t) })
}

func (e *sysEncoder) EndEncoding() { autoreleasePool(func() { e.id.Send(sel.endEncoding) }) }
