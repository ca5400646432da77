package strata

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func prefillAll(t *testing.T, s *Session, ids []int32, splits []int) []float32 {
	t.Helper()
	var out []float32
	at := 0
	for _, n := range append(splits, len(ids)-sum(splits)) {
		if n == 0 {
			continue
		}
		lg, err := s.Prefill(context.Background(), ids[at:at+n], PrefillOptions{AllLogits: true})
		if err != nil {
			t.Fatalf("chunk at %d (+%d): %v", at, n, err)
		}
		if lg.Pos0 != at {
			t.Fatalf("chunk at %d: logits Pos0 %d", at, lg.Pos0)
		}
		out = append(out, lg.Data...)
		at += n
	}
	return out
}

func sum(x []int) int {
	s := 0
	for _, v := range x {
		s += v
	}
	return s
}

// TestChunkedPrefill: splitting a prompt into chunks continues the session exactly (1e-4 of the
// one-shot logits) for both architectures.
func TestChunkedPrefill(t *testing.T) {
	ones := make([]int, 20)
	for i := range ones {
		ones[i] = 1
	}
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("a.input_ids")
			s, _ := m.NewSession(SessionOptions{MaxContext: 128})
			ref := prefillAll(t, s, ids, nil)
			for _, splits := range [][]int{{37}, {1}, {64}, ones} {
				s, _ := m.NewSession(SessionOptions{MaxContext: 128})
				got := prefillAll(t, s, ids, splits)
				d, _ := maxAbsDiff(got, ref)
				t.Logf("splits %v: max|diff| vs one-shot %.3g", splits, d)
				if d > 1e-4 {
					t.Errorf("splits %v: max|diff| %.3g > 1e-4", splits, d)
				}
				if s.Position() != len(ids) {
					t.Errorf("position %d, want %d", s.Position(), len(ids))
				}
			}
		})
	}
}

// TestSnapshotRestore: snapshot, continue one way, restore, continue another way == a fresh
// session fed the second path.
func TestSnapshotRestore(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("b.input_ids")
			prefix, pathA, pathB := ids[:40], ids[40:70], ids[100:140]
			s, _ := m.NewSession(SessionOptions{MaxContext: 128})
			ctx := context.Background()
			if _, err := s.Prefill(ctx, prefix, PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Prefill(ctx, pathA, PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.Restore(snap); err != nil {
				t.Fatal(err)
			}
			got, err := s.Prefill(ctx, pathB, PrefillOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			fresh, _ := m.NewSession(SessionOptions{MaxContext: 128})
			if _, err := fresh.Prefill(ctx, prefix, PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			want, err := fresh.Prefill(ctx, pathB, PrefillOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range want.Data {
				if got.Data[i] != want.Data[i] {
					t.Fatalf("logit %d after restore %v != fresh %v (want bitwise equal)", i, got.Data[i], want.Data[i])
				}
			}
		})
	}
}

// TestBadInputLeavesSessionUnchanged: each bad call returns its typed error and the session's
// position and whole cache are bitwise what they were.
func TestBadInputLeavesSessionUnchanged(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("a.input_ids")
			s, _ := m.NewSession(SessionOptions{MaxContext: 64})
			if _, err := s.Prefill(context.Background(), ids[:40], PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			before, _ := s.Snapshot()
			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			// A context cancelled from inside the prefill, after layer 1 ran.
			midCtx, midCancel := context.WithCancel(context.Background())
			defer midCancel()
			cases := []struct {
				name   string
				ctx    context.Context
				tokens []int32
				opts   PrefillOptions
				want   error
			}{
				{"token id = vocab", context.Background(), []int32{1, int32(m.Vocab())}, PrefillOptions{}, ErrInvalidArgument},
				{"negative token id", context.Background(), []int32{-1}, PrefillOptions{}, ErrInvalidArgument},
				{"empty prompt", context.Background(), nil, PrefillOptions{}, ErrInvalidArgument},
				{"beyond max context", context.Background(), ids[:25], PrefillOptions{}, ErrCapacity},
				{"cancelled context", cancelled, ids[40:50], PrefillOptions{}, ErrCancelled},
				{"cancelled mid-prefill", midCtx, ids[40:50], PrefillOptions{Progress: func(done, total int) {
					if done == 2 {
						midCancel()
					}
				}}, ErrCancelled},
			}
			for _, c := range cases {
				_, err := s.Prefill(c.ctx, c.tokens, c.opts)
				if !errors.Is(err, c.want) {
					t.Errorf("%s: error %v, want %v", c.name, err, c.want)
				}
				after, _ := s.Snapshot()
				if s.Position() != 40 || !before.Equal(after) {
					t.Errorf("%s: session changed (position %d)", c.name, s.Position())
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dev, _ := Open(Options{Backend: "cpu"})
	copyDir := func(t *testing.T, src string) string {
		dst := t.TempDir()
		ents, _ := os.ReadDir(src)
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
		}
		return dst
	}
	t.Run("truncated shard", func(t *testing.T) {
		d := copyDir(t, testdata("qwen4exp-tiny"))
		p := filepath.Join(d, "model-00002-of-00002.safetensors")
		st, _ := os.Stat(p)
		os.Truncate(p, st.Size()-1000)
		if _, err := LoadModel(dev, d, LoadOptions{}); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("error %v, want ErrCheckpoint", err)
		}
	})
	t.Run("corrupted header", func(t *testing.T) {
		d := copyDir(t, testdata("qwen3next-tiny"))
		p := filepath.Join(d, "model-00001-of-00002.safetensors")
		b, _ := os.ReadFile(p)
		copy(b[8:], "{\"x\":")
		os.WriteFile(p, b, 0o644)
		if _, err := LoadModel(dev, d, LoadOptions{}); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("error %v, want ErrCheckpoint", err)
		}
	})
	t.Run("unsupported model_type", func(t *testing.T) {
		d := copyDir(t, testdata("qwen3next-tiny"))
		p := filepath.Join(d, "config.json")
		b, _ := os.ReadFile(p)
		b = []byte(replaceOnce(string(b), `"qwen3_next"`, `"llama"`))
		os.WriteFile(p, b, 0o644)
		if _, err := LoadModel(dev, d, LoadOptions{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"llama"`) {
			t.Errorf("error %v, want ErrUnsupported naming the model type", err)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		if _, err := LoadModel(dev, filepath.Join(t.TempDir(), "nope"), LoadOptions{}); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("error %v, want ErrCheckpoint", err)
		}
	})
	t.Run("unknown backend", func(t *testing.T) {
		if _, err := Open(Options{Backend: "tpu"}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("error %v, want ErrInvalidArgument", err)
		}
	})
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// TestDeterministicAcrossGOMAXPROCS: logits are bitwise identical for GOMAXPROCS 1 and 2.
func TestDeterministicAcrossGOMAXPROCS(t *testing.T) {
	m := loadTiny(t, "qwen4exp-tiny")
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("b.input_ids")
	run := func(procs int) []float32 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		s, _ := m.NewSession(SessionOptions{MaxContext: 512})
		lg, err := s.Prefill(context.Background(), ids, PrefillOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		return lg.Data
	}
	a, b := run(1), run(2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: GOMAXPROCS=1 %v, =2 %v", i, a[i], b[i])
		}
	}
}

func TestBusySession(t *testing.T) {
	m := loadTiny(t, "qwen3next-tiny")
	s, _ := m.NewSession(SessionOptions{MaxContext: 64})
	if err := s.acquire(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prefill(context.Background(), []int32{1}, PrefillOptions{}); !errors.Is(err, ErrBusy) {
		t.Errorf("concurrent prefill: %v, want ErrBusy", err)
	}
	s.release()
}

// TestCloseModelDuringPrefill: Model.Close waits for a running prefill (which completes), and
// the session's later calls return ErrClosed; no unmapped memory is touched.
func TestCloseModelDuringPrefill(t *testing.T) {
	dev, _ := Open(Options{Backend: "cpu"})
	m, err := LoadModel(dev, testdata("qwen4exp-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSession(SessionOptions{MaxContext: 512})
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Prefill(context.Background(), make([]int32, 400), PrefillOptions{Progress: func(done, total int) {
			if done == 1 {
				close(started)
			}
		}})
		done <- err
	}()
	<-started
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("prefill running while Close was called: %v", err)
	}
	if _, err := s.Prefill(context.Background(), []int32{1}, PrefillOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("prefill after model close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("session close after model close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second model close: %v", err)
	}
}

// TestProgressPanicLeavesSessionUnchanged: a panic in the caller's Progress callback (at any
// layer, the last included) becomes an error and the session is bitwise what it was.
func TestProgressPanicLeavesSessionUnchanged(t *testing.T) {
	m := loadTiny(t, "qwen4exp-tiny")
	ids := openGoldens(t, "q4_model_goldens.safetensors").i32("a.input_ids")
	s, _ := m.NewSession(SessionOptions{MaxContext: 128})
	if _, err := s.Prefill(context.Background(), ids[:20], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	for at := 1; at <= m.Layers(); at++ {
		_, err := s.Prefill(context.Background(), ids[20:27], PrefillOptions{Progress: func(done, total int) {
			if done == at {
				panic("callback failure")
			}
		}})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("panic at layer %d: %v, want ErrInvalidArgument", at, err)
		}
		after, _ := s.Snapshot()
		if s.Position() != 20 || !before.Equal(after) {
			t.Fatalf("panic at layer %d: session changed (position %d)", at, s.Position())
		}
	}
}

// A NaN in the weights that reaches a MoE router fails the prefill with ErrBackend (not the
// caller's ErrInvalidArgument: the prompt was valid) and leaves the session as it was.
func TestNaNRouterWeightIsBackendError(t *testing.T) {
	dst := t.TempDir()
	src := testdata("qwen4exp-tiny")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Fill layer 0's router weight with bf16 NaN (0x7fc0), found through the shard's header.
	const name = "model.layers.0.mlp.gate.weight"
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	ib, err := os.ReadFile(filepath.Join(dst, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ib, &index); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(dst, index.WeightMap[name])
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]struct {
		DType   string  `json:"dtype"`
		Offsets []int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	e := header[name]
	if e.DType != "BF16" {
		t.Fatalf("%s is %s, the test writes bf16", name, e.DType)
	}
	for off := 8 + int64(n) + e.Offsets[0]; off < 8+int64(n)+e.Offsets[1]; off += 2 {
		binary.LittleEndian.PutUint16(b[off:], 0x7fc0)
	}
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"cpu", "emu"} {
		t.Run(backend, func(t *testing.T) {
			opts := Options{Backend: backend}
			if backend == "emu" {
				opts.MetalDevice = emuDevice(t) // the Metal kernels flag the NaN on the device
			}
			dev, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			m, err := LoadModel(dev, dst, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s, err := m.NewSession(SessionOptions{MaxContext: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before, _ := s.Snapshot()
			_, err = s.Prefill(context.Background(), []int32{1, 2, 3}, PrefillOptions{})
			if !errors.Is(err, ErrBackend) || errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "NaN") {
				t.Fatalf("error %v: want ErrBackend (not ErrInvalidArgument) naming the NaN", err)
			}
			after, _ := s.Snapshot()
			if s.Position() != 0 || !before.Equal(after) {
				t.Errorf("failed prefill changed the session (position %d)", s.Position())
			}
		})
	}
}

// TestReusedSessionBitwise: a session that takes a closed session's cache and scratch (after a
// longer prompt left every state dirty), and a session after Reset, give bitwise the logits of a
// session on fresh memory.
func TestReusedSessionBitwise(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("b.input_ids")
			ref, _ := m.NewSession(SessionOptions{MaxContext: 128})
			defer ref.Close()
			want := prefillAll(t, ref, ids[:60], nil)
			s1, _ := m.NewSession(SessionOptions{MaxContext: 128})
			prefillAll(t, s1, ids[:120], []int{50})
			c1, sc1 := s1.state, s1.scratch
			if err := s1.Close(); err != nil {
				t.Fatal(err)
			}
			s2, _ := m.NewSession(SessionOptions{MaxContext: 128})
			defer s2.Close()
			if s2.state != c1 || s2.scratch != sc1 {
				t.Fatal("the second session did not take the closed session's cache and scratch")
			}
			check := func(what string, got []float32) {
				t.Helper()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s: logit %d = %v, fresh session %v (want bitwise equal)", what, i, got[i], want[i])
					}
				}
			}
			check("reused cache", prefillAll(t, s2, ids[:60], nil))
			if _, err := s2.Prefill(context.Background(), ids[60:110], PrefillOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s2.Reset(); err != nil {
				t.Fatal(err)
			}
			check("after Reset", prefillAll(t, s2, ids[:60], nil))
			// Another capacity: the scratch is taken, the cache is new.
			s2.Close()
			s3, _ := m.NewSession(SessionOptions{MaxContext: 64})
			defer s3.Close()
			if s3.state == c1 || s3.scratch != sc1 {
				t.Fatal("a session of another MaxContext: want the spare scratch and a new cache")
			}
			check("other capacity", prefillAll(t, s3, ids[:60], nil))
		})
	}
}
