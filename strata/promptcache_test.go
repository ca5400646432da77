package strata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// splitRef is the reference of a prompt-cache prefill that resumed at R: a fresh session that
// prefills prompt[:R] and then prompt[R:], both in steps of every tokens.
func splitRef(t *testing.T, m *Model, prompt []int32, R, every int, all bool) []float32 {
	t.Helper()
	out, err := splitLogits(m, prompt, R, every, all)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func splitLogits(m *Model, prompt []int32, R, every int, all bool) ([]float32, error) {
	ctx := context.Background()
	s, err := m.NewSession(SessionOptions{MaxContext: 1024})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if R > 0 {
		if _, err := s.Prefill(ctx, prompt[:R], PrefillOptions{Step: every}); err != nil {
			return nil, err
		}
	}
	// The rest in calls that end at each multiple of every (absolute positions), as the cache
	// steps it.
	var out []float32
	for at := R; at < len(prompt); {
		end := min((at/every+1)*every, len(prompt))
		lg, err := s.Prefill(ctx, prompt[at:end], PrefillOptions{AllLogits: all})
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, lg.Data...)
		} else {
			out = lg.Data
		}
		at = end
	}
	return out, nil
}

// cachePrefill runs c.Prefill and checks the tokens reused, the source and the session's
// position and ids.
func cachePrefill(t *testing.T, c *PromptCache, s *Session, prompt []int32, all bool, reused int, from string) *Logits {
	t.Helper()
	lg, res, err := c.Prefill(context.Background(), s, prompt, PrefillOptions{AllLogits: all})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused != reused || res.From != from || res.Tokens != len(prompt) {
		t.Fatalf("reused %d of %d from %q, want %d from %q", res.Reused, res.Tokens, res.From, reused, from)
	}
	if toks, _ := s.Tokens(); !slices.Equal(toks, prompt) {
		t.Fatal("the session does not hold the prompt's ids after a cache prefill")
	}
	if all && (lg.Pos0 != reused || lg.Rows != len(prompt)-reused) {
		t.Fatalf("all logits: Pos0 %d, %d rows; want %d, %d", lg.Pos0, lg.Rows, reused, len(prompt)-reused)
	}
	return lg
}

// TestPromptCacheResume: a second prompt resumes from the deepest checkpoint whose tokens are a
// prefix of it, in memory or (a new cache on the same directory: another process) on disk, and
// its logits equal bitwise those of a prefill split at that checkpoint; the same prompt again
// needs no prefill (its logits come from the checkpoint); with all logits at least one token
// is prefilled; a session whose own tokens are a prefix is continued in place.
func TestPromptCacheResume(t *testing.T) {
	const every = 64
	for _, tm := range tinyModels {
		for _, disk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/disk=%v", tm.name, disk), func(t *testing.T) {
				m := loadTiny(t, tm.dir)
				opts := PromptCacheOptions{Every: every}
				if disk {
					opts.Dir = t.TempDir()
				}
				c, err := NewPromptCache(m, opts)
				if err != nil {
					t.Fatal(err)
				}
				A := testPrompt(m, 300, 11)
				B := append(slices.Clone(A[:200]), testPrompt(m, 100, 12)...)
				s, _ := m.NewSession(SessionOptions{MaxContext: 512})
				la := cachePrefill(t, c, s, A, false, 0, "")
				if !bitwiseEqual(la.Data, splitRef(t, m, A, 0, every, false)) {
					t.Fatal("a cold prefill through the cache differs from a prefill in steps of Every")
				}
				s2, _ := m.NewSession(SessionOptions{MaxContext: 512})
				lb := cachePrefill(t, c, s2, B, true, 192, "memory")
				if !bitwiseEqual(lb.Data, splitRef(t, m, B, 192, every, true)) {
					t.Fatal("B resumed at 192 differs from a prefill split at 192")
				}
				again := cachePrefill(t, c, s2, A, false, 300, "memory")
				if !bitwiseEqual(again.Data, la.Data) {
					t.Fatal("the whole prompt again: logits differ from its first prefill")
				}
				allA := cachePrefill(t, c, s2, A, true, 256, "memory")
				if !bitwiseEqual(allA.Data, splitRef(t, m, A, 256, every, true)) {
					t.Fatal("A with all logits resumed at 256 differs")
				}
				// The session holds B's 300 tokens; B plus 20 more continues it in place.
				B2 := append(slices.Clone(B), testPrompt(m, 20, 13)...)
				cachePrefill(t, c, s2, B, false, 300, "memory")
				lb2 := cachePrefill(t, c, s2, B2, false, 300, "session")
				s3, _ := m.NewSession(SessionOptions{MaxContext: 512})
				cachePrefill(t, c, s3, B, false, 300, "memory")
				ref, err := s3.Prefill(context.Background(), B2[300:], PrefillOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !bitwiseEqual(lb2.Data, ref.Data) {
					t.Fatal("continuing the session in place differs from a prefill of the rest")
				}
				if !disk {
					return
				}
				// A new cache on the directory (as another process would open it) resumes from disk.
				c2, err := NewPromptCache(m, opts)
				if err != nil {
					t.Fatal(err)
				}
				s4, _ := m.NewSession(SessionOptions{MaxContext: 512})
				// B's first prefill took a checkpoint at 256 (resumed at 192, in steps of 64).
				lb3 := cachePrefill(t, c2, s4, B, true, 256, "disk")
				if !bitwiseEqual(lb3.Data, splitRef(t, m, B, 256, every, true)) {
					t.Fatal("B resumed from disk at 256 differs from a prefill split at 256")
				}
				full := cachePrefill(t, c2, s4, A, false, 300, "disk")
				if !bitwiseEqual(full.Data, la.Data) {
					t.Fatal("the whole prompt from disk: logits differ")
				}
			})
		}
	}
}

// TestPromptCacheChat: a chat of 10 turns, each adding 30 tokens and each on a fresh session,
// resumes every turn from the end of the one before and gives the logits of one session that
// prefilled the turns as calls of their own, split at the multiples of Every as the cache steps
// them.
func TestPromptCacheChat(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen4exp-tiny")
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 64, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := m.NewSession(SessionOptions{MaxContext: 512})
	var prompt []int32
	for turn := range 10 {
		add := testPrompt(m, 30, uint64(100+turn))
		var want *Logits
		for at := 0; at < len(add); {
			end := min(len(add), ((ref.Position()/64)+1)*64-ref.Position()+at)
			if want, err = ref.Prefill(ctx, add[at:end], PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			at = end
		}
		from := "memory"
		if turn == 0 {
			from = ""
		}
		prev := len(prompt)
		prompt = append(prompt, add...)
		s, _ := m.NewSession(SessionOptions{MaxContext: 512})
		got := cachePrefill(t, c, s, prompt, false, prev, from)
		s.Close()
		if !bitwiseEqual(got.Data, want.Data) {
			t.Fatalf("turn %d differs from the same turns prefilled in one session", turn)
		}
	}
}

// dirStateBytes sums the sizes of the state files under dir and fails on a temporary file.
func dirStateBytes(t *testing.T, dir string) (n int, bytes int64) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".state") && !strings.HasPrefix(d.Name(), "."):
			info, _ := d.Info()
			n++
			bytes += info.Size()
		case d.Name() != ".lock":
			t.Errorf("%s left in the cache directory", p)
		}
		return nil
	})
	return n, bytes
}

// TestPromptCacheBudget: budgets smaller than one checkpoint are refused naming both sizes;
// memory and the directory stay within their budgets (least recently used out), and what was
// used last stays.
func TestPromptCacheBudget(t *testing.T) {
	m := loadTiny(t, "qwen3next-tiny")
	one := checkpointBytes(m, 1, true)
	for _, o := range []PromptCacheOptions{{Every: 32, Bytes: one - 1}, {Every: 32, Bytes: one, DiskBytes: one - 1, Dir: t.TempDir()}} {
		_, err := NewPromptCache(m, o)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), strconv.FormatInt(one-1, 10)) || !strings.Contains(err.Error(), strconv.FormatInt(one, 10)) {
			t.Fatalf("a budget of one byte less than a checkpoint of 1 token: %v, want ErrInvalidArgument with both sizes", err)
		}
	}
	// At prefill the checkpoints hold up to min(Every, MaxContext) tokens: a budget of 40
	// tokens' checkpoint serves sessions of 40 tokens with Every 1024, not sessions of 41.
	at40 := checkpointBytes(m, 40, true)
	small, err := NewPromptCache(m, PromptCacheOptions{Every: 1024, Bytes: at40})
	if err != nil {
		t.Fatalf("a budget of one checkpoint of 40 tokens with Every 1024: %v", err)
	}
	s40, _ := m.NewSession(SessionOptions{MaxContext: 40})
	if _, res, err := small.Prefill(context.Background(), s40, testPrompt(m, 40, 9), PrefillOptions{}); err != nil || res.Checkpoints != 1 || res.Skipped != 0 {
		t.Fatalf("a 40-token session under a budget of one 40-token checkpoint: %+v, %v", res, err)
	}
	s41, _ := m.NewSession(SessionOptions{MaxContext: 41})
	_, _, err = small.Prefill(context.Background(), s41, testPrompt(m, 40, 9), PrefillOptions{})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "one checkpoint of 41 tokens (min(Every 1024, the session's MaxContext 41)") {
		t.Fatalf("a 41-token session under a budget of one 40-token checkpoint: %v", err)
	}
	if _, err := NewPromptCache(m, PromptCacheOptions{Every: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Every -1: %v", err)
	}
	dir := t.TempDir()
	budget := 6 * checkpointBytes(m, 64, true)
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 32, Bytes: budget, DiskBytes: budget, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSession(SessionOptions{MaxContext: 512})
	var prompts [][]int32
	for i := range 8 {
		p := testPrompt(m, 100, uint64(200+i))
		prompts = append(prompts, p)
		_, res, err := c.Prefill(context.Background(), s, p, PrefillOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, held := dirStateBytes(t, dir)
		t.Logf("prompt %d: memory %d checkpoints %d B, disk %d files %d B (measured %d, %d B) of %d B", i, res.MemoryCheckpoints, res.MemoryBytes, res.DiskCheckpoints, res.DiskBytes, n, held, budget)
		if res.MemoryBytes > budget || held > budget || res.DiskBytes != held || res.DiskCheckpoints != n {
			t.Fatalf("over the budget of %d bytes or misreported: memory %d, disk %d (reported %d)", budget, res.MemoryBytes, held, res.DiskBytes)
		}
	}
	// The last prompt's end is cached, the first one's was evicted.
	if _, res, _ := c.Prefill(context.Background(), s, prompts[7], PrefillOptions{}); res.Reused != 100 {
		t.Fatalf("the last prompt again reused %d tokens, want 100", res.Reused)
	}
	if _, res, _ := c.Prefill(context.Background(), s, prompts[0], PrefillOptions{}); res.Reused != 0 {
		t.Fatalf("the first prompt, long evicted, reused %d tokens", res.Reused)
	}
}

// cacheState is what a test compares to tell a cache unchanged: its memory checkpoints and the
// files of its directory with their sizes.
func cacheState(c *PromptCache) string {
	c.mu.Lock()
	keys := make([]string, 0, len(c.mem))
	for k := range c.mem {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	slices.Sort(keys)
	out := strings.Join(keys, ",")
	if c.disk != nil {
		filepath.WalkDir(c.disk.root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				info, _ := d.Info()
				out += fmt.Sprintf(";%s %d", p, info.Size())
			}
			return err
		})
	}
	return out
}

// TestPromptCacheBadInput: a directory that cannot be written, a pipeline stage, bad tokens, a
// prompt over the session's capacity, another model's session, a cancelled prefill, corrupt or
// truncated checkpoint files and another process's temporary file: clear errors (or, for the
// files, a fallback to a sound checkpoint and the bad file removed), the session and the cache
// unchanged where the call failed.
func TestPromptCacheBadInput(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen4exp-tiny")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := NewPromptCache(m, PromptCacheOptions{Dir: filepath.Join(file, "cache")}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), file) {
		t.Fatalf("a cache directory under a file: %v, want ErrInvalidArgument naming it", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := t.TempDir()
		os.Chmod(ro, 0o500)
		if _, err := NewPromptCache(m, PromptCacheOptions{Dir: ro}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), ro) {
			t.Fatalf("a read-only cache directory: %v, want ErrInvalidArgument naming it", err)
		}
	}
	dev, _ := Open(Options{Backend: "cpu"})
	stage, err := LoadModel(dev, testdata("qwen4exp-tiny"), LoadOptions{Layers: [2]int{0, 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()
	if _, err := NewPromptCache(stage, PromptCacheOptions{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a prompt cache of a stage: %v, want ErrUnsupported", err)
	}

	dir := t.TempDir()
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 32, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	A := testPrompt(m, 100, 21)
	s, _ := m.NewSession(SessionOptions{MaxContext: 128})
	cachePrefill(t, c, s, A[:70], false, 0, "")
	s.Prefill(ctx, testPrompt(m, 10, 23), PrefillOptions{}) // the session: A[:70] and 10 other tokens
	before, _ := s.Snapshot()
	was := cacheState(c)
	other := loadTiny(t, "qwen3next-tiny")
	os2, _ := other.NewSession(SessionOptions{MaxContext: 128})
	bad := slices.Clone(A)
	bad[90] = int32(m.Vocab())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, c2 := range []struct {
		what     string
		ctx      context.Context
		s        *Session
		prompt   []int32
		sentinel error
	}{
		{"a token outside the vocabulary", ctx, s, bad, ErrInvalidArgument},
		{"an empty prompt", ctx, s, nil, ErrInvalidArgument},
		{"a prompt over the capacity", ctx, s, testPrompt(m, 129, 22), ErrCapacity},
		{"another model's session", ctx, os2, A, ErrInvalidArgument},
		{"a cancelled context", cancelled, s, A, ErrCancelled},
	} {
		_, _, err := c.Prefill(c2.ctx, c2.s, c2.prompt, PrefillOptions{})
		if !errors.Is(err, c2.sentinel) {
			t.Fatalf("%s: %v, want %v", c2.what, err, c2.sentinel)
		}
		unchanged(t, s, before, c2.what)
		if cacheState(c) != was {
			t.Fatalf("%s changed the cache", c2.what)
		}
	}
	// Cancelled after the restore, in the second step: the session's old state comes back.
	stop, cancel2 := context.WithCancel(ctx)
	steps := 0
	_, _, err = c.Prefill(stop, s, A, PrefillOptions{Progress: func(done, total int) {
		if steps++; steps == 2 {
			cancel2()
		}
	}})
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled mid-prefill: %v", err)
	}
	unchanged(t, s, before, "a prefill cancelled after the restore")

	// A corrupt and a truncated checkpoint file: passed over (and removed) for a sound one.
	c2, _ := NewPromptCache(m, PromptCacheOptions{Every: 32, Dir: dir})
	sub := c2.disk.dir
	deepest := filepath.Join(sub, checkpointName(70, c2.prefixKey(A[:70])))
	b, err := os.ReadFile(deepest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-9] ^= 4
	os.WriteFile(deepest, b, 0o644)
	at64 := filepath.Join(sub, checkpointName(64, c2.prefixKey(A[:64])))
	b, _ = os.ReadFile(at64)
	os.WriteFile(at64, b[:len(b)/2], 0o644)
	tmp := filepath.Join(sub, "."+checkpointName(96, "x")+".tmp-123")
	os.WriteFile(tmp, []byte("another process is writing this"), 0o644)
	s5, _ := m.NewSession(SessionOptions{MaxContext: 128})
	lg := cachePrefill(t, c2, s5, A, false, 32, "disk")
	if !bitwiseEqual(lg.Data, splitRef(t, m, A, 32, 32, false)) {
		t.Fatal("resumed past two damaged files at 32: differs from a prefill split at 32")
	}
	for _, p := range []string{deepest, at64} {
		if _, err := os.Stat(p); err == nil {
			// rewritten by the prefill (the same checkpoints, sound now): they must load
			if _, err := readStateFile(m, 128, p); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatal("a fresh temporary file of another process was removed")
	}
	old := time.Now().Add(-2 * staleTemp)
	os.Chtimes(tmp, old, old)
	cachePrefill(t, c2, s5, A[:50], false, 32, "disk")
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("a stale temporary file was not removed")
	}
}

// TestPromptCacheConcurrent: sessions on several goroutines share one cache (memory and
// directory); every prefill gives the bits of a prefill split where it resumed.
func TestPromptCacheConcurrent(t *testing.T) {
	m := loadTiny(t, "qwen3next-tiny")
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 32, Dir: t.TempDir(), Bytes: 40 * checkpointBytes(m, 160, true)})
	if err != nil {
		t.Fatal(err)
	}
	common := testPrompt(m, 96, 31)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := m.NewSession(SessionOptions{MaxContext: 256})
			defer s.Close()
			for i := range 3 {
				p := append(slices.Clone(common), testPrompt(m, 60, uint64(40+10*g+i))...)
				lg, res, err := c.Prefill(context.Background(), s, p, PrefillOptions{AllLogits: true})
				if err != nil {
					errs <- err
					return
				}
				want, err := splitLogits(m, p, res.Reused, 32, true)
				if err != nil {
					errs <- err
					return
				}
				if res.Reused%32 != 0 || !bitwiseEqual(lg.Data, want) {
					errs <- fmt.Errorf("goroutine %d prompt %d: resumed at %d, differs from a prefill split there", g, i, res.Reused)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

const cacheChildEnv = "STRATA_TEST_CACHE_CHILD"

// TestPromptCacheChild is one of the processes of TestPromptCacheProcesses: it prefills the
// prompts named in the environment through a cache on the shared directory. Without the
// environment variable it does nothing.
func TestPromptCacheChild(t *testing.T) {
	raw := os.Getenv(cacheChildEnv)
	if raw == "" {
		t.Skip("run by TestPromptCacheProcesses in processes of their own")
	}
	var a struct {
		Dir     string
		Budget  int64
		Prompts [][]int32
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	m := loadTiny(t, "qwen3next-tiny")
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 16, Dir: a.Dir, DiskBytes: a.Budget})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSession(SessionOptions{MaxContext: 256})
	for _, p := range a.Prompts {
		if _, _, err := c.Prefill(context.Background(), s, p, PrefillOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPromptCacheProcesses: two processes prefill overlapping prompts at once through caches on
// one directory under a small disk budget (so that both write the same checkpoints and evict
// each other's); afterwards every file there is a sound state file, none is a temporary
// leftover, and the directory is within its budget.
func TestPromptCacheProcesses(t *testing.T) {
	m := loadTiny(t, "qwen3next-tiny")
	dir := t.TempDir()
	budget := 12 * checkpointBytes(m, 120, true)
	var prompts [][]int32
	common := testPrompt(m, 64, 51)
	for i := range 6 {
		prompts = append(prompts, append(slices.Clone(common), testPrompt(m, 56, uint64(60+i%3))...))
	}
	raw, _ := json.Marshal(map[string]any{"Dir": dir, "Budget": budget, "Prompts": prompts})
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestPromptCacheChild$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), cacheChildEnv+"="+string(raw))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[i].String(), "--- PASS: TestPromptCacheChild") {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	n, held := dirStateBytes(t, dir)
	if n == 0 || held > budget {
		t.Fatalf("%d files of %d bytes after two processes, budget %d", n, held, budget)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".state") {
			if _, err := readStateFile(m, 256, p); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		return err
	})
	t.Logf("%d sound state files, %d bytes of the %d-byte budget", n, held, budget)
}

// TestPromptCacheEmu: on the Metal kernels (MSL emulator) a resumed prompt gives the bits of a
// prefill split at its checkpoint.
func TestPromptCacheEmu(t *testing.T) {
	_, m := loadTinyMetal(t, "qwen3next-tiny")
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 16})
	if err != nil {
		t.Fatal(err)
	}
	A := testPrompt(m, 40, 61)
	B := append(slices.Clone(A[:36]), testPrompt(m, 4, 62)...)
	s, _ := m.NewSession(SessionOptions{MaxContext: 64})
	cachePrefill(t, c, s, A, false, 0, "")
	lg := cachePrefill(t, c, s, B, true, 32, "memory")
	if !bitwiseEqual(lg.Data, splitRef(t, m, B, 32, 16, true)) {
		t.Fatal("emu: B resumed at 32 differs from a prefill split at 32")
	}
}

// TestPromptCacheAbsoluteGrid: checkpoints lie on the multiples of Every whatever the call
// history: after a call of 300 tokens, a call of 700 that resumes at 300 takes them at 512 and
// 700 (its end), so a third prompt sharing 550 tokens with it resumes at 512, bitwise as the
// same prefill calls in one session.
func TestPromptCacheAbsoluteGrid(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen4exp-tiny")
	c, err := NewPromptCache(m, PromptCacheOptions{Every: 256})
	if err != nil {
		t.Fatal(err)
	}
	A := testPrompt(m, 700, 41)
	B := append(slices.Clone(A[:550]), testPrompt(m, 100, 42)...)
	s, _ := m.NewSession(SessionOptions{MaxContext: 1024})
	if _, res, err := c.Prefill(ctx, s, A[:300], PrefillOptions{}); err != nil || res.Checkpoints != 2 {
		t.Fatalf("300 tokens: %+v, %v; want checkpoints at 256 and 300", res, err)
	}
	s2, _ := m.NewSession(SessionOptions{MaxContext: 1024})
	_, res, err := c.Prefill(ctx, s2, A, PrefillOptions{})
	if err != nil || res.Reused != 300 || res.Checkpoints != 2 {
		t.Fatalf("700 tokens: %+v, %v; want 300 reused and checkpoints at 512 and 700", res, err)
	}
	c.mu.Lock()
	var at []int
	for _, ck := range c.mem {
		at = append(at, ck.pos)
	}
	c.mu.Unlock()
	slices.Sort(at)
	if !slices.Equal(at, []int{256, 300, 512, 700}) {
		t.Fatalf("checkpoints at %v, want [256 300 512 700]", at)
	}
	s3, _ := m.NewSession(SessionOptions{MaxContext: 1024})
	got := cachePrefill(t, c, s3, B, true, 512, "memory")
	// The state at 512 was made by the calls 0..256, 256..300 (the first call's end), 300..512.
	ref, _ := m.NewSession(SessionOptions{MaxContext: 1024})
	var want *Logits
	for _, r := range [][2]int{{0, 256}, {256, 300}, {300, 512}, {512, 650}} {
		if want, err = ref.Prefill(ctx, B[r[0]:r[1]], PrefillOptions{AllLogits: true}); err != nil {
			t.Fatal(err)
		}
	}
	if !bitwiseEqual(got.Data, want.Data) {
		t.Fatal("resumed at 512: logits differ from the same prefill calls in one session")
	}
}
