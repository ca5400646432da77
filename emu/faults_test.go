package emu

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/metal/mtl"
)

// runReverse runs a reverse kernel of faults.metal on 256 threads and returns y.
func runReverse(t *testing.T, s Schedule, kernel string) []float32 {
	dev := openDev(t, Options{Schedule: s, Seed: 11})
	p := pipe(t, loadLib(t, dev, "faults.metal"), kernel)
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i)
	}
	y := newBuf(t, dev, 4*256)
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: y}}, nil, [3]int{1, 1, 1}, [3]int{256, 1, 1}); err != nil {
		t.Fatal(err)
	}
	return f32s(y)
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// A missing barrier shows as results that depend on the lane schedule; with the barrier all
// schedules agree bitwise and the result is right.
func TestMissingBarrierCaughtBySchedules(t *testing.T) {
	var ok, racy [][]float32
	for _, s := range []Schedule{Forward, Reversed, Shuffled} {
		ok = append(ok, runReverse(t, s, "reverse_barrier"))
		racy = append(racy, runReverse(t, s, "reverse_no_barrier"))
	}
	for i, v := range ok[0] {
		if v != float32(255-i) {
			t.Fatalf("reverse_barrier: y[%d] = %v, want %d", i, v, 255-i)
		}
	}
	if !sameBits(ok[0], ok[1]) || !sameBits(ok[0], ok[2]) {
		t.Error("reverse_barrier: schedules disagree")
	}
	if sameBits(racy[0], racy[1]) {
		t.Error("reverse_no_barrier: forward and reversed schedules agree; the missing barrier went unnoticed")
	}
	// Reads of threadgroup memory not yet written see the poison (NaN).
	if !math.IsNaN(float64(racy[0][0])) {
		t.Errorf("forward schedule: thread 0 read %v before thread 255 wrote, want the NaN poison", racy[0][0])
	}
}

func TestFaults(t *testing.T) {
	dev := openDev(t, Options{})
	lib := loadLib(t, dev, "faults.metal")

	// Divergent barrier / collective within a simdgroup.
	p := pipe(t, lib, "divergent")
	err := dispatch(t, dev, p, []arg{{buf: newBuf(t, dev, 4*64)}}, nil, [3]int{1, 1, 1}, [3]int{64, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "deadlock or divergence") ||
		!strings.Contains(err.Error(), "threadgroup_barrier at line") || !strings.Contains(err.Error(), "simd_sum at line") {
		t.Errorf("divergent: %v", err)
	}

	// 33 KiB of kernel-scope threadgroup memory fails at pipeline creation.
	_, err = lib.Pipeline("too_big", nil)
	if !errors.Is(err, mtl.ErrCompile) || !strings.Contains(err.Error(), "33792 bytes") {
		t.Errorf("too_big: %v", err)
	}

	// 16 KiB static + 20 KiB dynamic fails at dispatch; 16 + 1 KiB runs.
	p = pipe(t, lib, "half_tg")
	if got := p.StaticThreadgroupMemoryLength(); got != 16384 {
		t.Errorf("half_tg static threadgroup memory %d, want 16384", got)
	}
	y := newBuf(t, dev, 4*128)
	err = dispatch(t, dev, p, []arg{{buf: y}}, map[int]int{0: 20480}, [3]int{1, 1, 1}, [3]int{128, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "over the 32768-byte limit") {
		t.Errorf("half_tg with 20 KiB dynamic: %v", err)
	}
	if err := dispatch(t, dev, p, []arg{{buf: y}}, map[int]int{0: 1024}, [3]int{1, 1, 1}, [3]int{128, 1, 1}); err != nil {
		t.Fatal(err)
	}
	for i, v := range f32s(y) {
		if v != 3 {
			t.Fatalf("half_tg: y[%d] = %v, want 3", i, v)
		}
	}
	var found bool
	for _, s := range dev.Stats() {
		if s.Kernel == "half_tg" {
			found = s.StaticThreadgroupMemory == 16384 && s.MaxThreadgroupMemory == 16384+1024
		}
	}
	if !found {
		t.Errorf("stats do not report half_tg's threadgroup memory: %+v", dev.Stats())
	}

	// Too many threads per threadgroup, and an unbound buffer.
	if err := dispatch(t, dev, p, []arg{{buf: y}}, map[int]int{0: 16}, [3]int{1, 1, 1}, [3]int{2048, 1, 1}); !errors.Is(err, mtl.ErrExecution) {
		t.Errorf("2048 threads: %v", err)
	}
	p = pipe(t, lib, "unchecked_write")
	err = dispatch(t, dev, p, nil, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "buffer(0) not bound") {
		t.Errorf("unbound buffer: %v", err)
	}
}

func TestASanCatchesOutOfBoundsWrite(t *testing.T) {
	dev := openDev(t, Options{ASan: true, Threads: 2})
	lib := loadLib(t, dev, "faults.metal")
	p := pipe(t, lib, "unchecked_write")
	y := newBuf(t, dev, 4*100)
	// In bounds: runs, and the helper's results come back.
	if err := dispatch(t, dev, p, []arg{{buf: y}}, nil, [3]int{3, 1, 1}, [3]int{32, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(y); got[95] != 95 || got[96] != 0 {
		t.Errorf("in-bounds run: y[95], y[96] = %v, %v", got[95], got[96])
	}
	// 128 threads write 100 floats.
	err := dispatch(t, dev, p, []arg{{buf: y}}, nil, [3]int{4, 1, 1}, [3]int{32, 1, 1})
	if !errors.Is(err, mtl.ErrExecution) || !strings.Contains(err.Error(), "heap-buffer-overflow") ||
		!strings.Contains(err.Error(), "kernel unchecked_write, threadgroup (3,0,0), thread 4") {
		t.Errorf("out-of-bounds write: %v", err)
	}
	// The reverse kernel with its barrier is clean under ASan too.
	p = pipe(t, lib, "reverse_barrier")
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i)
	}
	yb := newBuf(t, dev, 4*256)
	if err := dispatch(t, dev, p, []arg{{buf: f32Buf(t, dev, x)}, {buf: yb}}, nil, [3]int{1, 1, 1}, [3]int{256, 1, 1}); err != nil {
		t.Fatal(err)
	}
	if got := f32s(yb); got[0] != 255 || got[255] != 0 {
		t.Errorf("reverse_barrier under ASan: %v ... %v", got[0], got[255])
	}
}

func TestCompileErrorsAndCache(t *testing.T) {
	cache := t.TempDir()
	dev := openDev(t, Options{CacheDir: cache})
	_, err := dev.NewLibrary("bad.metal", "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* y [[buffer(0)]]) {\n  y[0] = undefined_name;\n}\n", testCompile)
	if !errors.Is(err, mtl.ErrCompile) || !strings.Contains(err.Error(), "bad.metal:4") {
		t.Errorf("compile error: %v", err)
	}
	src, err := os.ReadFile("testdata/scan.metal")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	lib, err := dev.NewLibrary("scan.metal", string(src), testCompile)
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(t0)
	t0 = time.Now()
	lib2, err := dev.NewLibrary("scan.metal", string(src), testCompile)
	if err != nil {
		t.Fatal(err)
	}
	warm := time.Since(t0)
	if lib.(*library).cached || !lib2.(*library).cached {
		t.Errorf("cache: first cached=%t, second cached=%t", lib.(*library).cached, lib2.(*library).cached)
	}
	t.Logf("scan.metal: empty cache %v, cache hit %v", cold, warm)
}

// Faults a kernel's inputs cause (integer division by zero, a misaligned vector store, a wild
// store, a stack overflow) fail the command buffer with mtl.ErrExecution naming the kernel,
// threadgroup and thread; the process and the device go on.
func TestKernelFaultsDoNotKillTheProcess(t *testing.T) {
	for _, asan := range []bool{false, true} {
		dev := openDev(t, Options{ASan: asan, Threads: 2})
		lib := loadLib(t, dev, "faults.metal")
		u32 := func(v uint32) []byte { return u32Bytes(v) }
		u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
		cases := []struct {
			kernel string
			args   []arg
			groups int
			want   []string // in the error, in-process; ASan reports its own text
			asan   []string
		}{
			{"div_by", []arg{{buf: newBuf(t, dev, 4*64)}, {bytes: u32(0)}}, 2, []string{"integer division by zero (SIGFPE)"}, []string{"FPE"}},
			{"misaligned", []arg{{buf: newBuf(t, dev, 4*64)}}, 1, []string{"misaligned memory access"}, []string{"misaligned"}},
			{"wild", []arg{{buf: newBuf(t, dev, 4)}, {bytes: u64(0x10)}}, 1, []string{"SIGSEGV", "0x10"}, []string{"SEGV"}},
			{"deep", []arg{{buf: newBuf(t, dev, 4*32)}, {bytes: u32(1 << 22)}}, 1, []string{"SIGSEGV"}, []string{"stack-overflow"}},
		}
		for _, c := range cases {
			p := pipe(t, lib, c.kernel)
			err := dispatch(t, dev, p, c.args, nil, [3]int{c.groups, 1, 1}, [3]int{32, 1, 1})
			want := c.want
			if asan {
				want = c.asan
			}
			if !errors.Is(err, mtl.ErrExecution) {
				t.Errorf("asan=%t %s: %v, want mtl.ErrExecution", asan, c.kernel, err)
				continue
			}
			msg := err.Error()
			for _, w := range append(want, "kernel "+c.kernel, "threadgroup (", "thread ") {
				if !strings.Contains(msg, w) {
					t.Errorf("asan=%t %s: error lacks %q:\n%v", asan, c.kernel, w, err)
				}
			}
		}
		// The device still runs kernels.
		y := newBuf(t, dev, 4*32)
		if err := dispatch(t, dev, pipe(t, lib, "unchecked_write"), []arg{{buf: y}}, nil, [3]int{1, 1, 1}, [3]int{32, 1, 1}); err != nil {
			t.Fatalf("asan=%t: after the faults: %v", asan, err)
		}
		if g := f32s(y)[31]; g != 31 {
			t.Errorf("asan=%t: after the faults: y[31] = %v, want 31", asan, g)
		}
	}
}
