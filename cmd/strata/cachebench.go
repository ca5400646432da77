package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/stratakernels/strata/strata"
)

// Sizes of the prompt-cache benchmark (BENCHMARKS.md, "Prompt cache").
const (
	benchLong   = 8192 // the long prompt
	benchShared = 7373 // the tokens the second prompt shares with it: 90%
	benchTurns  = 10   // chat turns
	benchTurn   = 500  // tokens each turn adds
)

// runCacheBench is --bench-cache on the model of --model or --preset, with the cache
// directory, budget and spacing of --prompt-cache, --prompt-cache-bytes and --prompt-cache-every.
func (o *options) runCacheBench(ctx context.Context, dev *strata.Device) error {
	dir, err := o.modelDir(ctx)
	if err != nil {
		return err
	}
	return runCacheBench(ctx, dev, dir, o.state.cacheDir, o.state.cacheBytes, o.state.cacheEvery, o.set("prompt-cache-every"))
}

// runCacheBench measures the prompt cache on the model in dir, all ratios taken in this run:
//
//  1. checkpoint costs: a state of benchLong tokens copied to host memory, written to a state
//     file (fsync included) and loaded back, against the time to prefill one token; and a
//     prefill of 4096 tokens in steps of 512, 1024 and 2048 (a cache's steps are at most its
//     spacing), interleaved;
//  2. a second prompt sharing benchShared tokens of a benchLong-token one, resumed from memory
//     and from the directory (a new cache on it, as a new process would open it), against a
//     cold prefill of the long prompt without the cache, three times;
//  3. a chat of benchTurns turns, each adding benchTurn tokens on a fresh session: resumed from
//     memory, and from the directory by a new cache per turn, against adding the same tokens to
//     a live session without the cache, interleaved turn by turn.
//
// The cache directory is cacheDir (a temporary one when empty, removed afterwards), with
// budget bytes in memory and on disk.
func runCacheBench(ctx context.Context, dev *strata.Device, dir, cacheDir string, budget int64, every int, everySet bool) error {
	if cacheDir == "" {
		tmp, err := os.MkdirTemp("", "strata-cache-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cacheDir = tmp
	}
	m, err := strata.LoadModel(dev, dir, strata.LoadOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Printf("cpu       %s, GOMAXPROCS %d; load average %s\n", cpuModel(), runtime.GOMAXPROCS(0), loadAvg())
	fmt.Printf("model     %s\n          %s\n", m.Describe(), homeRel(dir))
	fmt.Printf("cache     every %d tokens, budget %.0f MiB in memory and in %s\n", every, mibOf(budget), homeRel(cacheDir))
	b := &cacheBench{ctx: ctx, m: m, r: rand.New(rand.NewPCG(7, 0xcac4e)), dir: cacheDir, budget: budget, every: every}
	// The weights are read once before anything is timed (the page cache may have dropped them).
	warm, err := b.newSession()
	if err != nil {
		return err
	}
	if _, err := b.plain(warm, b.random(512), 0); err != nil {
		return err
	}
	warm.Close()
	for _, part := range []func() error{b.checkpointCosts, b.sharedPrompt, b.chat} {
		if err := part(); err != nil {
			return err
		}
	}
	fmt.Printf("\npeak RSS %.0f MiB; load average %s\n", mibOf(vmHWM()), loadAvg())
	if !everySet {
		fmt.Printf("(spacing: the default, %d tokens)\n", strata.DefaultCheckpointEvery)
	}
	return nil
}

// cacheBench is one --bench-cache run: the model, the random tokens' source, and the cache's
// directory, budget and spacing.
type cacheBench struct {
	ctx    context.Context
	m      *strata.Model
	r      *rand.Rand
	dir    string
	budget int64
	every  int
}

// random is n random token ids.
func (b *cacheBench) random(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(b.r.IntN(b.m.Vocab()))
	}
	return out
}

// newSession is a session that holds the longest prompt of the benchmark.
func (b *cacheBench) newSession() (*strata.Session, error) {
	return b.m.NewSession(strata.SessionOptions{MaxContext: benchLong + benchTurns*benchTurn})
}

// plain prefills tokens on s without the cache, in steps of step (0: the default), and returns
// the time it took.
func (b *cacheBench) plain(s *strata.Session, tokens []int32, step int) (time.Duration, error) {
	t0 := time.Now()
	_, err := s.Prefill(b.ctx, tokens, strata.PrefillOptions{Step: step})
	return time.Since(t0), err
}

// newCache is a prompt cache in dir (memory only when dir is empty).
func (b *cacheBench) newCache(dir string) (*strata.PromptCache, error) {
	return strata.NewPromptCache(b.m, strata.PromptCacheOptions{Dir: dir, Bytes: b.budget, Every: b.every})
}

// checkpointCosts is part 1: a state's copy, write and load against the prefill of a token, the
// prefill's steps, and what each checkpoint spacing costs.
func (b *cacheBench) checkpointCosts() error {
	fmt.Println("\n1. checkpoint costs and steps")
	s, err := b.newSession()
	if err != nil {
		return err
	}
	defer s.Close()
	tLong, err := b.plain(s, b.random(benchLong), 0)
	if err != nil {
		return err
	}
	perToken := tLong / benchLong
	t0 := time.Now()
	if _, err := s.Snapshot(); err != nil {
		return err
	}
	tCopy := time.Since(t0)
	path := filepath.Join(b.dir, "bench.state")
	t0 = time.Now()
	if err := s.SaveStateFile(path); err != nil {
		return err
	}
	tWrite := time.Since(t0)
	fi, _ := os.Stat(path)
	t0 = time.Now()
	if err := s.LoadStateFile(path); err != nil {
		return err
	}
	tRead := time.Since(t0)
	os.Remove(path)
	s.Close()
	fmt.Printf("   cold prefill of %d tokens (steps of %d) %v: %v per token\n", benchLong, strata.DefaultStep, tLong.Round(time.Millisecond), perToken.Round(time.Microsecond))
	fmt.Printf("   state of %d tokens, %.1f MiB: copy %v, write %v, load %v = %.1f / %.1f / %.1f tokens of prefill\n", benchLong, mibOf(fi.Size()),
		tCopy.Round(time.Millisecond), tWrite.Round(time.Millisecond), tRead.Round(time.Millisecond),
		float64(tCopy)/float64(perToken), float64(tWrite)/float64(perToken), float64(tRead)/float64(perToken))
	if err := b.steps(); err != nil {
		return err
	}
	fmt.Printf("   per checkpoint spacing E, for a %d-token prompt: checkpoints, their bytes, tokens recomputed on average by a resume (E/2)\n", benchLong)
	for _, e := range []int{256, 512, 1024, 2048} {
		var bytes int64
		for p := e; p <= benchLong; p += e {
			bytes += stateBytes(b.m, p)
		}
		fmt.Printf("   E %4d: %2d checkpoints, %7.1f MiB, write about %v; a resume recomputes %4d tokens (%v)\n", e, benchLong/e, mibOf(bytes),
			time.Duration(float64(tWrite)*float64(bytes)/float64(fi.Size())).Round(time.Millisecond), e/2, (time.Duration(e/2) * perToken).Round(time.Millisecond))
	}
	return nil
}

// steps times a prefill of 4096 tokens in steps of 512, 1024 and 2048, interleaved, each twice,
// the faster kept.
func (b *cacheBench) steps() error {
	steps := []int{512, 1024, 2048}
	stepTime := map[int]time.Duration{}
	mid := b.random(4096)
	for _, st := range append(slices.Clone(steps), steps...) {
		s, err := b.newSession()
		if err != nil {
			return err
		}
		d, err := b.plain(s, mid, st)
		s.Close()
		if err != nil {
			return err
		}
		if old, ok := stepTime[st]; !ok || d < old {
			stepTime[st] = d
		}
	}
	for _, st := range steps {
		fmt.Printf("   4096 tokens in steps of %4d: %v (%.3fx the steps of 2048)\n", st, stepTime[st].Round(time.Millisecond), float64(stepTime[st])/float64(stepTime[2048]))
	}
	return nil
}

// sharedPrompt is part 2: three times, a prompt sharing 90% of a long one, from memory and from
// the directory, against the cold prefill.
func (b *cacheBench) sharedPrompt() error {
	fmt.Println("\n2. a prompt sharing 90% of a long one (time: wall, and this process's CPU time)")
	var memR, diskR, memC, diskC []float64
	for rep := range 3 {
		tPlain, tMem, tDisk, err := b.sharedRep(rep)
		if err != nil {
			return err
		}
		memR, diskR = append(memR, tMem.ratio(tPlain)), append(diskR, tDisk.ratio(tPlain))
		memC, diskC = append(memC, tMem.cpuRatio(tPlain)), append(diskC, tDisk.cpuRatio(tPlain))
	}
	fmt.Printf("   median of the 3: from memory %.3f wall / %.3f CPU, from disk %.3f wall / %.3f CPU of the cold prefill\n", median(memR), median(memC), median(diskR), median(diskC))
	return nil
}

// sharedRep is one repetition of part 2 (its own cache directory): the cold prefill without
// the cache and through it, then two prompts sharing its first benchShared tokens, from the
// first cache's memory and through a second cache on the same directory.
func (b *cacheBench) sharedRep(rep int) (tPlain, tMem, tDisk timing, err error) {
	A := b.random(benchLong)
	B1 := append(slices.Clone(A[:benchShared]), b.random(benchLong-benchShared)...)
	B2 := append(slices.Clone(A[:benchShared]), b.random(benchLong-benchShared)...)
	sub := filepath.Join(b.dir, fmt.Sprintf("shared%d", rep))
	c, err := b.newCache(sub)
	if err != nil {
		return
	}
	s, err := b.newSession()
	if err != nil {
		return
	}
	err = tPlain.of(func() error { _, err := b.plain(s, A, 0); return err })
	s.Close()
	if err != nil {
		return
	}
	var tCold timing
	cold, err := cachedRun(b.ctx, c, b.newSession, A, &tCold)
	if err != nil {
		return
	}
	mem, err := cachedRun(b.ctx, c, b.newSession, B1, &tMem)
	if err != nil {
		return
	}
	c2, err := b.newCache(sub)
	if err != nil {
		return
	}
	disk, err := cachedRun(b.ctx, c2, b.newSession, B2, &tDisk)
	if err != nil {
		return
	}
	fmt.Printf("   rep %d: cold prefill without the cache %v; through the cache %v (%.3fx wall, %.3fx CPU; %d checkpoints, %.1f MiB, %v)\n", rep+1,
		tPlain, tCold, tCold.ratio(tPlain), tCold.cpuRatio(tPlain), cold.Checkpoints, mibOf(cold.CheckpointBytes), cold.CheckpointTime.Round(time.Millisecond))
	for _, x := range []struct {
		what string
		res  *strata.PromptCacheResult
		t    timing
	}{{"memory", mem, tMem}, {"disk", disk, tDisk}} {
		fmt.Printf("          second prompt from %-6s reused %d of %d, %v = %.3f (wall) / %.3f (CPU) of the cold prefill (restore %v, checkpoints %v)\n", x.what,
			x.res.Reused, x.res.Tokens, x.t, x.t.ratio(tPlain), x.t.cpuRatio(tPlain), x.res.Restore.Round(time.Millisecond), x.res.CheckpointTime.Round(time.Millisecond))
	}
	fmt.Printf("          held after them: the first cache's memory %d checkpoints, %.1f of %.0f MiB; the directory %d files, %.1f of %.0f MiB\n",
		mem.MemoryCheckpoints, mibOf(mem.MemoryBytes), mibOf(b.budget), disk.DiskCheckpoints, mibOf(disk.DiskBytes), mibOf(b.budget))
	return tPlain, tMem, tDisk, nil
}

// chat is part 3: a chat of benchTurns turns from memory and from the directory against a
// live session.
func (b *cacheBench) chat() error {
	fmt.Printf("\n3. a chat of %d turns of %d tokens, each turn on a fresh session (time: wall, and this process's CPU time)\n", benchTurns, benchTurn)
	live, err := b.newSession()
	if err != nil {
		return err
	}
	defer live.Close()
	cm, err := b.newCache("")
	if err != nil {
		return err
	}
	chatDir := filepath.Join(b.dir, "chat")
	var prompt []int32
	var sumRef, sumMem, sumDisk timing
	var maxMem, maxDisk int64
	var turnMem, turnDisk []float64
	for turn := range benchTurns {
		add := b.random(benchTurn)
		prompt = append(prompt, add...)
		var tRef, tMem, tDisk timing
		if err := tRef.of(func() error { _, err := b.plain(live, add, 0); return err }); err != nil {
			return err
		}
		mem, err := cachedRun(b.ctx, cm, b.newSession, prompt, &tMem)
		if err != nil {
			return err
		}
		cd, err := b.newCache(chatDir)
		if err != nil {
			return err
		}
		disk, err := cachedRun(b.ctx, cd, b.newSession, prompt, &tDisk)
		if err != nil {
			return err
		}
		sumRef.add(tRef)
		sumMem.add(tMem)
		sumDisk.add(tDisk)
		maxMem, maxDisk = max(maxMem, mem.MemoryBytes), max(maxDisk, disk.DiskBytes)
		turnMem, turnDisk = append(turnMem, tMem.cpuRatio(tRef)), append(turnDisk, tDisk.cpuRatio(tRef))
		fmt.Printf("   turn %2d (%5d tokens): live session %v; cache from memory %v (%.3fx wall, %.3fx CPU; reused %d), from disk %v (%.3fx, %.3fx; reused %d); memory %.1f MiB, disk %.1f MiB\n",
			turn+1, len(prompt), tRef, tMem, tMem.ratio(tRef), tMem.cpuRatio(tRef), mem.Reused,
			tDisk, tDisk.ratio(tRef), tDisk.cpuRatio(tRef), disk.Reused, mibOf(mem.MemoryBytes), mibOf(disk.DiskBytes))
	}
	fmt.Printf("   all turns: live %v; from memory %v (%.3fx wall, %.3fx CPU); from disk %v (%.3fx wall, %.3fx CPU)\n",
		sumRef, sumMem, sumMem.ratio(sumRef), sumMem.cpuRatio(sumRef), sumDisk, sumDisk.ratio(sumRef), sumDisk.cpuRatio(sumRef))
	fmt.Printf("   per turn, CPU time: from memory median %.3fx, max %.3fx; from disk median %.3fx, max %.3fx\n",
		median(turnMem), slices.Max(turnMem), median(turnDisk), slices.Max(turnDisk))
	fmt.Printf("   held: memory at most %.1f MiB, the directory at most %.1f MiB, of the %.0f MiB budget\n", mibOf(maxMem), mibOf(maxDisk), mibOf(b.budget))
	return nil
}

// cachedRun prefills prompt through the cache on a fresh session, timed into t, and returns what
// the cache did.
func cachedRun(ctx context.Context, c *strata.PromptCache, newSession func() (*strata.Session, error), prompt []int32, t *timing) (*strata.PromptCacheResult, error) {
	s, err := newSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var res *strata.PromptCacheResult
	err = t.of(func() error {
		var err error
		_, res, err = c.Prefill(ctx, s, prompt, strata.PrefillOptions{})
		return err
	})
	return res, err
}

// timing is the wall and CPU time (this process's, user and system: less disturbed by other
// jobs on a shared machine than the wall time) of a piece of work.
type timing struct{ wall, cpu time.Duration }

// of runs fn and records its times.
func (t *timing) of(fn func() error) error {
	c0, w0 := cpuTime(), time.Now()
	err := fn()
	t.wall, t.cpu = time.Since(w0), cpuTime()-c0
	return err
}

func (t *timing) add(o timing) { t.wall += o.wall; t.cpu += o.cpu }

func (t timing) ratio(o timing) float64    { return float64(t.wall) / float64(o.wall) }
func (t timing) cpuRatio(o timing) float64 { return float64(t.cpu) / float64(o.cpu) }

func (t timing) String() string {
	return fmt.Sprintf("%v (CPU %v)", t.wall.Round(time.Millisecond), t.cpu.Round(time.Millisecond))
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(x []float64) float64 {
	y := slices.Sorted(slices.Values(x))
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

// stateBytes is the size of a session state of pos tokens of m (the data of its state file).
func stateBytes(m *strata.Model, pos int) int64 {
	per, fixed := m.StateBytes()
	return fixed + int64(pos)*per
}

// loadAvg is /proc/loadavg's three load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
