package strata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stratakernels/strata/internal/cputime"
)

// bitwiseEqual reports whether two logit slices hold the same bits.
func bitwiseEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestPrefillSteps: a prompt longer than PrefillOptions.Step runs in steps within one call and
// gives the bits of explicit chunked calls of the same size (all logits, and the last token's),
// leaves the same session state, and reports progress over every layer of every step.
func TestPrefillSteps(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("b.input_ids") // 300 tokens
			ctx := context.Background()
			const step = 37
			for _, all := range []bool{true, false} {
				ref, _ := m.NewSession(SessionOptions{MaxContext: 512})
				var want []float32
				for at := 0; at < len(ids); at += step {
					lg, err := ref.Prefill(ctx, ids[at:min(at+step, len(ids))], PrefillOptions{AllLogits: all, Step: OneShot})
					if err != nil {
						t.Fatal(err)
					}
					if all || at+step >= len(ids) {
						want = append(want, lg.Data...)
					}
				}
				s, _ := m.NewSession(SessionOptions{MaxContext: 512})
				var calls, last, total int
				got, err := s.Prefill(ctx, ids, PrefillOptions{AllLogits: all, Step: step, Progress: func(done, tot int) { calls++; last, total = done, tot }})
				if err != nil {
					t.Fatal(err)
				}
				if !bitwiseEqual(got.Data, want) {
					d, _ := maxAbsDiff(got.Data, want)
					t.Fatalf("all logits %v: steps of %d differ from chunked calls (max |diff| %.3g)", all, step, d)
				}
				steps := (len(ids) + step - 1) / step
				if calls != steps*len(m.layers) || last != total || total != steps*len(m.layers) {
					t.Errorf("progress: %d calls, last %d of %d; want %d", calls, last, total, steps*len(m.layers))
				}
				if wantRows := map[bool]int{true: len(ids), false: 1}[all]; got.Rows != wantRows || got.Stats.Tokens != len(ids) {
					t.Errorf("rows %d (want %d), stats tokens %d", got.Rows, wantRows, got.Stats.Tokens)
				}
				a, _ := s.Snapshot()
				b, _ := ref.Snapshot()
				if !a.Equal(b) {
					t.Fatal("session state after steps differs from the chunked calls'")
				}
			}
		})
	}
}

// TestPrefillStepFailureRestores: a prefill cancelled in its third step leaves the session as it
// was before the call (position and every cache byte), not after its first two steps: from a
// position past 0 (the backup restored) and from 0 (the cache cleared).
func TestPrefillStepFailureRestores(t *testing.T) {
	m := loadTiny(t, "qwen4exp-tiny")
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("b.input_ids")
	s, _ := m.NewSession(SessionOptions{MaxContext: 512})
	if _, err := s.Prefill(context.Background(), ids[:20], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Prefill(ctx, ids[20:], PrefillOptions{Step: 40, Progress: func(done, total int) {
		if done == 2*len(m.layers)+1 {
			cancel()
		}
	}})
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("error %v, want ErrCancelled", err)
	}
	after, _ := s.Snapshot()
	if s.Position() != 20 || !before.Equal(after) {
		t.Fatalf("a failed third step left position %d (want 20) or changed the cache", s.Position())
	}
	// From position 0 (a new session, then the same one Reset) nothing is backed up: the cache
	// is cleared. It then equals a new session's, and prefills to its bits.
	fresh, _ := m.NewSession(SessionOptions{MaxContext: 512})
	empty, _ := fresh.Snapshot()
	want, err := fresh.Prefill(context.Background(), ids, PrefillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, reset := range []bool{false, true} {
		s, _ := m.NewSession(SessionOptions{MaxContext: 512})
		if reset {
			if _, err := s.Prefill(context.Background(), ids[:20], PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			s.Reset()
		}
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := s.Prefill(ctx, ids, PrefillOptions{Step: 40, Progress: func(done, total int) {
			if done == 2*len(m.layers)+1 {
				cancel()
			}
		}}); !errors.Is(err, ErrCancelled) {
			t.Fatalf("reset %v: error %v, want ErrCancelled", reset, err)
		}
		after, _ := s.Snapshot()
		if s.Position() != 0 || !after.Equal(empty) {
			t.Fatalf("reset %v: a failed first prefill left position %d or a cache unlike a new session's", reset, s.Position())
		}
		got, err := s.Prefill(context.Background(), ids, PrefillOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bitwiseEqual(got.Data, want.Data) {
			t.Fatalf("reset %v: the prefill after the failed one differs from a new session's", reset)
		}
	}
}

// TestStepBytes: the activation estimate of one step covers what the CPU backend's scratch holds
// after steps of that size, and is not far above it.
func TestStepBytes(t *testing.T) {
	for _, tm := range tinyModels {
		m := loadTiny(t, tm.dir)
		ids := openGoldens(t, tm.goldens).i32("b.input_ids")
		for _, step := range []int{1, 64, 300} {
			s, _ := m.NewSession(SessionOptions{MaxContext: 512})
			if _, err := s.Prefill(context.Background(), ids, PrefillOptions{Step: step}); err != nil {
				t.Fatal(err)
			}
			held, est := s.scratch.Bytes(), m.stepBytes(step)
			t.Logf("%s step %d: scratch %d B, estimate %d B", tm.name, step, held, est)
			if est < held || est > 2*held+4096 {
				t.Errorf("%s step %d: estimate %d B for %d B of scratch", tm.name, step, est, held)
			}
			s.Close()
		}
	}
}

// TestOutOfMemory: under a memory limit, a session cache or a prefill step that would not fit is
// refused with ErrOutOfMemory naming both byte counts, before any allocation, and the session
// is unchanged.
func TestOutOfMemory(t *testing.T) {
	m := loadTiny(t, "qwen3next-tiny")
	old := debug.SetMemoryLimit(64 << 20)
	defer debug.SetMemoryLimit(old)
	if _, err := m.NewSession(SessionOptions{MaxContext: 1 << 20}); !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "MiB are available") {
		t.Fatalf("a 1M-token cache under a 64 MiB limit: %v, want ErrOutOfMemory with the sizes", err)
	}
	s, err := m.NewSession(SessionOptions{MaxContext: 4096})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	ids := make([]int32, 4000)
	for i := range ids {
		ids[i] = int32(i % 500)
	}
	// all logits of 4000 tokens: 2 x 4000 x 512 x 4 B = 16 MiB, plus one-shot activations.
	_, err = s.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true, Step: OneShot})
	if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "MiB of activations") {
		t.Fatalf("a one-shot 4000-token prefill under a 64 MiB limit: %v, want ErrOutOfMemory", err)
	}
	after, _ := s.Snapshot()
	if s.Position() != 0 || !before.Equal(after) {
		t.Fatal("a refused prefill changed the session")
	}
	t.Log(err)
}

// TestStages: a model split into two pipeline stages (layers 0..k-1 and k..L-1, each loaded by
// itself) chained through the residual streams gives the whole model's logits bitwise, one-shot
// and in steps, for every split point; a stage reads only its own layers' tensors (and the
// embedding or the head where it holds them); misuse of Hidden is refused.
func TestStages(t *testing.T) {
	ctx := context.Background()
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			whole := loadTiny(t, tm.dir)
			L := whole.Layers()
			ids := openGoldens(t, tm.goldens).i32("a.input_ids")
			for _, step := range []int{OneShot, 41} {
				ws, _ := whole.NewSession(SessionOptions{MaxContext: 128})
				want, err := ws.Prefill(ctx, ids, PrefillOptions{AllLogits: true, Step: step})
				if err != nil {
					t.Fatal(err)
				}
				for k := 1; k < L; k++ {
					load := func(lo, hi int) *Model {
						m, err := LoadModel(dev, testdata(tm.dir), LoadOptions{Layers: [2]int{lo, hi}})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { m.Close() })
						return m
					}
					first, second := load(0, k), load(k, L)
					s1, _ := first.NewSession(SessionOptions{MaxContext: 128})
					h, err := s1.Prefill(ctx, ids, PrefillOptions{Step: step})
					if err != nil {
						t.Fatal(err)
					}
					if h.Rows != 0 || len(h.Hidden) != len(ids)*first.HiddenSize() {
						t.Fatalf("stage [0, %d): %d logit rows, %d hidden floats", k, h.Rows, len(h.Hidden))
					}
					s2, _ := second.NewSession(SessionOptions{MaxContext: 128})
					got, err := s2.Prefill(ctx, ids, PrefillOptions{AllLogits: true, Step: step, Hidden: h.Hidden})
					if err != nil {
						t.Fatal(err)
					}
					if !bitwiseEqual(got.Data, want.Data) {
						d, _ := maxAbsDiff(got.Data, want.Data)
						t.Fatalf("split at %d, step %d: logits differ from the whole model's (max |diff| %.3g)", k, step, d)
					}
				}
			}
			// Each stage reads only its tensors.
			for _, r := range [][2]int{{0, 1}, {1, L}} {
				var read []string
				m, err := LoadModel(dev, testdata(tm.dir), LoadOptions{Layers: r, Progress: func(_, _ int64, name string) { read = append(read, name) }})
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range read {
					for i := 0; i < L; i++ {
						if strings.Contains(name, fmt.Sprintf("layers.%d.", i)) && (i < r[0] || i >= r[1]) {
							t.Errorf("stage %v read %s", r, name)
						}
					}
					if (strings.Contains(name, "lm_head") || strings.HasSuffix(name, "norm.weight") && !strings.Contains(name, "layers.")) && r[1] != L {
						t.Errorf("stage %v read the head tensor %s", r, name)
					}
				}
				m.Close()
			}
			// Misuse.
			mid := func(lo, hi int) *Model {
				m, err := LoadModel(dev, testdata(tm.dir), LoadOptions{Layers: [2]int{lo, hi}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close() })
				return m
			}
			s, _ := mid(1, L).NewSession(SessionOptions{MaxContext: 128})
			if _, err := s.Prefill(ctx, ids, PrefillOptions{}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "Hidden") {
				t.Errorf("a later stage without Hidden: %v", err)
			}
			if _, err := s.Prefill(ctx, ids, PrefillOptions{Hidden: make([]float32, 7)}); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Hidden of the wrong length: %v", err)
			}
			s0, _ := whole.NewSession(SessionOptions{MaxContext: 128})
			if _, err := s0.Prefill(ctx, ids, PrefillOptions{Hidden: make([]float32, len(ids)*whole.HiddenSize())}); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Hidden given to the first stage: %v", err)
			}
			for _, r := range [][2]int{{1, 1}, {-1, 2}, {0, L + 1}, {3, 2}} {
				if _, err := LoadModel(dev, testdata(tm.dir), LoadOptions{Layers: r}); !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("Layers %v: %v, want ErrInvalidArgument", r, err)
				}
			}
		})
	}
}

// TestStageWiden: a stage without the embedding or the head loads with every weight widened and
// reports its resident bytes (the missing matrices are not counted or touched).
func TestStageWiden(t *testing.T) {
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range tinyModels {
		whole := loadTiny(t, tm.dir)
		L := whole.Layers()
		m, err := LoadModel(dev, testdata(tm.dir), LoadOptions{Layers: [2]int{1, L - 1}, WidenBudget: -1})
		if err != nil {
			t.Fatalf("%s: stage [1, %d) widened: %v", tm.name, L-1, err)
		}
		if got, all := m.Info().ResidentBytes, whole.Info().ResidentBytes; got <= 0 || got >= 2*all {
			t.Errorf("%s: middle stage resident %d B, whole model %d B", tm.name, got, all)
		}
		m.Close()
	}
}

// TestStatsCPU: on the CPU backend a prefill reports each stage's CPU time (Linux and macOS),
// its system part within it, and, summed over the stages and the steps of the call
// (Stats.Add), no more than the process's CPU time over the whole call.
func TestStatsCPU(t *testing.T) {
	m := loadTiny(t, "qwen4exp-tiny")
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("b.input_ids")
	s, _ := m.NewSession(SessionOptions{MaxContext: 512})
	u0, s0, ok := cputime.Process()
	lg, err := s.Prefill(context.Background(), ids, PrefillOptions{Step: 64})
	if err != nil {
		t.Fatal(err)
	}
	u1, s1, _ := cputime.Process()
	if !ok {
		t.Skip("no process CPU time on this system")
	}
	st := lg.Stats
	var cpu, sys time.Duration
	for i := range st.Stage {
		if st.SysCPU[i] < 0 || st.SysCPU[i] > st.CPU[i] {
			t.Errorf("%v: system %v of CPU %v", Stage(i), st.SysCPU[i], st.CPU[i])
		}
		cpu, sys = cpu+st.CPU[i], sys+st.SysCPU[i]
	}
	if whole := u1 - u0 + s1 - s0; cpu <= 0 || cpu > whole || sys > s1-s0 {
		t.Errorf("stages' CPU %v (system %v), the process's over the call %v (system %v)", cpu, sys, whole, s1-s0)
	}
	var sum Stats
	s, _ = m.NewSession(SessionOptions{MaxContext: 512})
	for at := 0; at < len(ids); at += 100 {
		lg, err := s.Prefill(context.Background(), ids[at:at+100], PrefillOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, wantSys := sum.CPU, sum.SysCPU
		for i := range want {
			want[i] += lg.Stats.CPU[i]
			wantSys[i] += lg.Stats.SysCPU[i]
		}
		sum.Add(lg.Stats)
		if sum.CPU != want || sum.SysCPU != wantSys || sum.Tokens != at+100 {
			t.Fatalf("Add: CPU %v, system %v, want %v, %v; tokens %d", sum.CPU, sum.SysCPU, want, wantSys, sum.Tokens)
		}
	}
}
