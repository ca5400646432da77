package emu

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// dispatchDesc mirrors struct emu_dispatch of include/emu_rt.h.
type dispatchDesc struct {
	Seed     uint64
	Buf      [maxBindings]uint64
	BufLen   [maxBindings]uint64
	Kernel   int32
	Flags    int32
	Groups   [3]uint32
	Threads  [3]uint32
	Schedule int32
	Workers  int32
	TGLen    [maxBindings]uint32
	FCVal    [maxConstants]uint32
	FCSet    [maxConstants]uint8
	StaticTG uint32
	TGLimit  uint32
	Err      [2048]byte
}

func (d *dispatchDesc) errText() string {
	n := 0
	for n < len(d.Err) && d.Err[n] != 0 {
		n++
	}
	return string(d.Err[:n])
}

// sharedObject is a compiled library loaded into this process.
type sharedObject struct {
	handle uintptr
	run    func(d unsafe.Pointer) int32
	tg     func(k int32) uint32
	mt     func(k int32) uint32
}

func openShared(path string, nkernels int) (*sharedObject, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, err
	}
	so := &sharedObject{handle: h}
	var size func() uintptr
	var count func() int32
	purego.RegisterLibFunc(&size, h, "emu_dispatch_size")
	purego.RegisterLibFunc(&count, h, "emu_kernel_count")
	purego.RegisterLibFunc(&so.run, h, "emu_run")
	purego.RegisterLibFunc(&so.tg, h, "emu_kernel_static_tg")
	purego.RegisterLibFunc(&so.mt, h, "emu_kernel_max_threads")
	if got, want := size(), unsafe.Sizeof(dispatchDesc{}); got != want {
		so.close()
		return nil, fmt.Errorf("dispatch descriptor is %d bytes in C, %d in Go", got, want)
	}
	if n := count(); int(n) != nkernels {
		so.close()
		return nil, fmt.Errorf("library has %d kernels, metadata %d", n, nkernels)
	}
	return so, nil
}

func (s *sharedObject) close() error {
	if s.handle == 0 {
		return nil
	}
	err := purego.Dlclose(s.handle)
	s.handle = 0
	return err
}

// staticTG is kernel k's static threadgroup memory in bytes.
func (s *sharedObject) staticTG(k int32) uint32 { return s.tg(k) }

// maxThreads is kernel k's limit of threads per threadgroup.
func (s *sharedObject) maxThreads(k int32) uint32 { return s.mt(k) }
