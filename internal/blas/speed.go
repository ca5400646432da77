package blas

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/cpu"
)

// The GEMM is chosen by speed, not by presence: when a native library loads (and runs each
// call on its caller's thread, as package kernels uses it), it is timed against strata's own
// SGEMM on the products of a prefill (speedShapes) and the faster one runs. The measurement
// takes about half a second and is made once per machine: its result is kept in the user cache
// directory (speedCacheFile), keyed by what it depends on (speedKey: the CPU, the library file
// and its version and kernel set, strata's SGEMM and its kernel set). A cache that cannot be read
// or parsed, or written, is measured around and Impl says so. STRATA_BLAS=native or strata skips
// the measurement.

// ownKernelVersion names the state of strata's SGEMM (strata.go and the internal/panel kernels
// it runs) for the cache key: change it when they change speed, so that machines measure again.
const ownKernelVersion = "sgemm-1"

// speedMargin: strata's GEMM replaces the native library only when the native library's
// estimated time is more than this factor of strata's. Near a tie either is as fast, and the
// margin keeps a fresh measurement on a noisy machine from flipping the choice (and so the
// bits of every product) back and forth.
const speedMargin = 1.02

// speedShape is one product y[m, n] = x[m, k] w[n, k]^T as the CPU backend's MatMul hands it to
// Sgemm (one column block of W), with calls, the number of such calls in one Gated DeltaNet layer of
// Qwen3.8-Flash-Next (D 2560, GDN in_proj 16512 rows, out_proj K 6144, 512 experts top-10 with
// I 640, one shared expert) at the shape's T.
type speedShape struct{ m, n, k, calls int }

// speedShapes: T = 512 and 2048. Column blocks are gemmBlockRows of kernels (2^19 float32:
// 192 rows at K 2560, 64 at K 6144, 800 at K 640). Dense products run at m = T (in_proj and
// shared expert gate_up: 86 + 7 blocks of 192; out_proj: 40 of 64; shared down: 4 of 800),
// routed experts at their mean rows T*10/512 (gate_up: 7 blocks per expert; down: 4).
var speedShapes = func() []speedShape {
	var s []speedShape
	for _, T := range []int{512, 2048} {
		r := T * 10 / 512
		s = append(s,
			speedShape{T, 192, 2560, 93}, speedShape{T, 64, 6144, 40}, speedShape{T, 800, 640, 4},
			speedShape{r, 192, 2560, 512 * 7}, speedShape{r, 800, 640, 512 * 4})
	}
	return s
}()

// speedEntry is one cached measurement: the estimated time of the speedShapes layers with each
// implementation and the choice made from them.
type speedEntry struct {
	Native   string    `json:"native"`    // the native library's name as Impl gives it
	Strata   string    `json:"strata"`    // strata's GEMM's name
	NativeMs float64   `json:"native_ms"` // estimated ms for one layer at T = 512 plus one at 2048
	StrataMs float64   `json:"strata_ms"`
	Choice   string    `json:"choice"` // "native" or "strata"
	When     time.Time `json:"when"`
}

// speedCache is the cache file's content: entries by speedKey.
type speedCache struct {
	Entries map[string]speedEntry `json:"entries"`
}

// speedCacheFile is the cache's path: os.UserCacheDir()/strata/blas-speed.json.
func speedCacheFile() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "strata", "blas-speed.json"), nil
}

// bySpeed returns the faster of native and own for the machine described by key, from the
// cache file at path or, when it holds no valid entry for key, by measure (whose result is then
// stored); note says which was picked, by how much and whether it was measured now or read from
// the cache, and what went wrong with the cache (path "" means no cache could be located:
// pathErr says why). measure returns the estimated times of native and own.
func bySpeed(native, own backend, key, path string, pathErr error,
	measure func(native, own backend) (time.Duration, time.Duration)) (b backend, note string) {
	var cacheNote string
	var cache speedCache
	if path == "" {
		cacheNote = fmt.Sprintf("not cached: no user cache directory: %v", pathErr)
	} else if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &cache); err != nil {
			cacheNote = fmt.Sprintf("cache %s unreadable (%v): measured again", path, err)
			cache = speedCache{}
		} else if e, ok := cache.Entries[key]; ok {
			if e.Choice == "native" || e.Choice == "strata" {
				return speedPick(native, own, e, "cached in "+path)
			}
			cacheNote = fmt.Sprintf("cache %s: entry with choice %q: measured again", path, e.Choice)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		cacheNote = fmt.Sprintf("cache %s unreadable (%v): measured again", path, err)
	}
	tn, ts := measure(native, own)
	e := speedEntry{Native: native.name(), Strata: own.name(),
		NativeMs: tn.Seconds() * 1e3, StrataMs: ts.Seconds() * 1e3, Choice: "native", When: time.Now().UTC()}
	if float64(tn) > speedMargin*float64(ts) {
		e.Choice = "strata"
	}
	where := "measured now"
	if path != "" {
		if cache.Entries == nil {
			cache.Entries = map[string]speedEntry{}
		}
		cache.Entries[key] = e
		if err := writeCache(path, cache); err != nil {
			where += fmt.Sprintf(", not cached: %v", err)
		} else {
			where += ", cached in " + path
		}
	}
	if cacheNote != "" {
		where = cacheNote + "; " + where
	}
	return speedPick(native, own, e, where)
}

// speedPick returns the backend e chose and the note saying why: the other implementation's
// estimated time over the chosen one's ("1.19x the speed of openblas ..."; below 1 when the
// native library was kept within speedMargin).
func speedPick(native, own backend, e speedEntry, where string) (backend, string) {
	b, other, ratio := native, e.Strata, e.StrataMs/e.NativeMs
	if e.Choice == "strata" {
		b, other, ratio = own, e.Native, e.NativeMs/e.StrataMs
	}
	margin := ""
	if ratio < 1 {
		margin = fmt.Sprintf(", within the %.0f%% kept for the native library", (speedMargin-1)*100)
	}
	return b, fmt.Sprintf("picked by speed: %.2fx the speed of %s on prefill GEMMs at T 512 and 2048%s; %s",
		ratio, other, margin, where)
}

// writeCache replaces the file at path with c, through a temporary file in the same directory
// (a reader never sees half a file), creating the directory.
func writeCache(path string, c speedCache) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".blas-speed-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(data, '\n'))
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

// speedKey names everything the measurement depends on: the CPU (cpuKey), the native library
// (its name as Impl gives it: version, kernel set, threading; and libKey: its file), strata's
// SGEMM and its kernel set, and ownKernelVersion.
func speedKey(native, own backend) string {
	return strings.Join([]string{cpuKey(), native.name(), libKey(), own.name(), ownKernelVersion, runtime.GOOS + "/" + runtime.GOARCH}, " | ")
}

// measureSpeed estimates the time of one speedShapes layer at T = 512 plus one at 2048 with
// native and own: each shape timed alone on one thread (the thread's CPU time where the OS
// gives it, so other processes on a shared core do not count), the implementations alternated
// A B B A over three rounds and the fastest round of each kept, then weighted by the shape's
// calls.
func measureSpeed(native, own backend) (time.Duration, time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewPCG(3, 5))
	type operands struct{ x, w, y []float32 }
	ops := make([]operands, len(speedShapes))
	for i, s := range speedShapes {
		ops[i] = operands{randUniform(r, s.m*s.k), randUniform(r, s.n*s.k), make([]float32, s.m*s.n)}
	}
	// reps makes each shape's timing cover at least about 8 MFLOP (the expert shapes are small).
	reps := func(s speedShape) int { return max(1, (8<<20)/(2*s.m*s.n*s.k)) }
	time1 := func(b backend, i int) time.Duration {
		s, o := speedShapes[i], ops[i]
		n := reps(s)
		t0 := threadTime()
		for range n {
			b.sgemm(false, true, s.m, s.n, s.k, 1, o.x, s.k, o.w, s.k, 0, o.y, s.n)
		}
		return (threadTime() - t0) / time.Duration(n)
	}
	best := [2][]time.Duration{make([]time.Duration, len(speedShapes)), make([]time.Duration, len(speedShapes))}
	for i := range best[0] {
		best[0][i], best[1][i] = 1<<62, 1<<62
	}
	for i := range speedShapes { // warm-up: first-touch pages, library initialisation
		time1(native, i)
		time1(own, i)
	}
	order := []int{0, 1, 1, 0, 0, 1}
	for _, w := range order {
		b := []backend{native, own}[w]
		for i := range speedShapes {
			best[w][i] = min(best[w][i], time1(b, i))
		}
	}
	var total [2]time.Duration
	for w := range total {
		for i, s := range speedShapes {
			total[w] += best[w][i] * time.Duration(s.calls)
		}
	}
	return total[0], total[1]
}

// randUniform is n values uniform in [-1, 1) (the speed of a product does not depend on them;
// making normal values for the shapes took a third of a second).
func randUniform(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	s := r.Uint64() | 1
	for i := range x {
		s = s*6364136223846793005 + 1442695040888963407 // Knuth's MMIX LCG
		x[i] = float32(int32(s>>32)) * (1.0 / (1 << 31))
	}
	return x
}

// cpuFeatureKey lists the CPU features that decide which kernels run, for the cache key.
func cpuFeatureKey(flags map[string]bool) string {
	var on []string
	for f, ok := range flags {
		if ok {
			on = append(on, f)
		}
	}
	slices.Sort(on)
	return strings.Join(on, ",")
}

// simdFeatures are the features of x/sys/cpu the SGEMMs choose kernels by.
func simdFeatures() map[string]bool {
	return map[string]bool{
		"avx": cpu.X86.HasAVX, "avx2": cpu.X86.HasAVX2, "fma": cpu.X86.HasFMA,
		"avx512f": cpu.X86.HasAVX512F, "avx512bw": cpu.X86.HasAVX512BW, "avx512dq": cpu.X86.HasAVX512DQ,
		"avx512vl": cpu.X86.HasAVX512VL, "asimd": cpu.ARM64.HasASIMD, "sve": cpu.ARM64.HasSVE,
	}
}
