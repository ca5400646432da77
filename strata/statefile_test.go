package strata

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratakernels/strata/internal/modelgen"
	"github.com/stratakernels/strata/internal/safetensors"
)

// testPrompt is n token ids drawn from the model's vocabulary with the given seed.
func testPrompt(m *Model, n int, seed uint64) []int32 {
	r := rand.New(rand.NewPCG(seed, 0x57a7e))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(m.Vocab()))
	}
	return out
}

// childEnv carries the arguments of TestStateFileChild.
const childEnv = "STRATA_TEST_STATE_CHILD"

type childArgs struct {
	Dir, Backend, State, Out string
	Rest                     []int32
	MaxContext               int
}

// TestStateFileChild is the second process of TestStateFileNewProcess: it loads the model and
// the state file, checks the session's position and token ids, prefills the rest of the prompt
// and writes all its logits (float32, little-endian) to Out. Without the environment variable it
// does nothing.
func TestStateFileChild(t *testing.T) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		t.Skip("run by TestStateFileNewProcess in a process of its own")
	}
	var a childArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	dev, err := Open(Options{Backend: a.Backend})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	m, err := LoadModel(dev, a.Dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(SessionOptions{MaxContext: a.MaxContext})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.LoadStateFile(a.State); err != nil {
		t.Fatal(err)
	}
	lg, err := s.Prefill(context.Background(), a.Rest, PrefillOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4*len(lg.Data))
	for i, v := range lg.Data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	if err := os.WriteFile(a.Out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runChild runs TestStateFileChild in a new process of this test binary and returns its logits.
func runChild(t *testing.T, a childArgs) []float32 {
	t.Helper()
	a.Out = filepath.Join(t.TempDir(), "logits.bin")
	raw, _ := json.Marshal(a)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStateFileChild$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestStateFileChild")) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	b, err := os.ReadFile(a.Out)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(b)/4)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return got
}

// splitAt400 prefills prompt[:400] in s, saves the session to a file, then prefills the rest in
// the same session (a prefill of the whole prompt split at 400) and returns the file and those
// logits.
func splitAt400(t *testing.T, s *Session, prompt []int32) (string, []float32) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Prefill(ctx, prompt[:400], PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.state")
	if err := s.SaveStateFile(path); err != nil {
		t.Fatal(err)
	}
	want, err := s.Prefill(ctx, prompt[400:], PrefillOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	return path, want.Data
}

// TestStateFileNewProcess: a session saved after 400 tokens and loaded in a new process
// continues exactly: the logits of the remaining tokens equal bitwise those of a prefill of the
// whole prompt split at 400, on the cpu backend for both families.
func TestStateFileNewProcess(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			m := loadTiny(t, tm.dir)
			prompt := testPrompt(m, 440, 1)
			s, _ := m.NewSession(SessionOptions{MaxContext: 512})
			path, want := splitAt400(t, s, prompt)
			got := runChild(t, childArgs{Dir: testdata(tm.dir), Backend: "cpu", State: path, Rest: prompt[400:], MaxContext: 512})
			if !bitwiseEqual(got, want) {
				d, _ := maxAbsDiff(got, want)
				t.Fatalf("logits after loading in a new process differ from the split prefill (max |diff| %.3g)", d)
			}
		})
	}
}

// TestStateFileNewProcessEmu: the same on the Metal kernels (MSL emulator): the states come
// back from the device into the file and go back onto it in the new process, bitwise. A file
// made on the cpu loads on emu holding the same state bits (saved again there, its data section
// is the cpu file's byte for byte) and continues within the cpu/emu agreement of the Metal
// tests; a file made on emu loads on the cpu likewise.
func TestStateFileNewProcessEmu(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			_, m := loadTinyMetal(t, tm.dir)
			prompt := testPrompt(m, 424, 2)
			s, _ := m.NewSession(SessionOptions{MaxContext: 512})
			emuPath, want := splitAt400(t, s, prompt)
			got := runChild(t, childArgs{Dir: testdata(tm.dir), Backend: "emu", State: emuPath, Rest: prompt[400:], MaxContext: 512})
			if !bitwiseEqual(got, want) {
				d, _ := maxAbsDiff(got, want)
				t.Fatalf("emu: logits after loading in a new process differ from the split prefill (max |diff| %.3g)", d)
			}

			cpu := loadTiny(t, tm.dir)
			cs, _ := cpu.NewSession(SessionOptions{MaxContext: 512})
			cpuPath, cpuWant := splitAt400(t, cs, prompt)
			es, _ := m.NewSession(SessionOptions{MaxContext: 512})
			if err := es.LoadStateFile(cpuPath); err != nil {
				t.Fatalf("a cpu file on emu: %v", err)
			}
			again := filepath.Join(t.TempDir(), "again.state")
			if err := es.SaveStateFile(again); err != nil {
				t.Fatal(err)
			}
			if a, b := dataSection(t, cpuPath), dataSection(t, again); !bytes.Equal(a, b) {
				t.Fatal("a cpu state loaded on emu and saved again differs from the cpu file")
			}
			lg, err := es.Prefill(context.Background(), prompt[400:], PrefillOptions{AllLogits: true})
			if err != nil {
				t.Fatal(err)
			}
			if d, sc := maxAbsDiff(lg.Data, cpuWant); d > 1e-4*sc {
				t.Fatalf("emu continuing a cpu state: max |diff| %.3g of %.3g from the cpu", d, sc)
			}
			back, _ := cpu.NewSession(SessionOptions{MaxContext: 512})
			if err := back.LoadStateFile(emuPath); err != nil {
				t.Fatalf("an emu file on the cpu: %v", err)
			}
			if toks, _ := back.Tokens(); !slices.Equal(toks, prompt[:400]) {
				t.Fatal("an emu file on the cpu: token ids differ")
			}
		})
	}
}

// dataSection returns the bytes of a state file after its header.
func dataSection(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b[8+binary.LittleEndian.Uint64(b):]
}

// unchanged fails the test when the session differs from the snapshot taken before.
func unchanged(t *testing.T, s *Session, before *Snapshot, what string) {
	t.Helper()
	after, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !before.Equal(after) || s.Position() != before.Position() {
		t.Fatalf("%s changed the session (position %d, was %d)", what, s.Position(), before.Position())
	}
}

// TestStateFileBadInput: truncated and bit-flipped files, another model's and another
// checkpoint's file, another stage's, a newer format version, a file holding more tokens than
// the session's capacity, trailing bytes, files that are not state files: each is refused with
// an error naming the file and what does not match, and the session stays as it was.
func TestStateFileBadInput(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen4exp-tiny")
	other := loadTiny(t, "qwen3next-tiny")
	dir := t.TempDir()
	save := func(m *Model, n int, name string) (string, []byte) {
		s, _ := m.NewSession(SessionOptions{MaxContext: 256})
		if _, err := s.Prefill(ctx, testPrompt(m, n, 3), PrefillOptions{}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := s.SaveStateFile(path); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		return path, b
	}
	good, img := save(m, 40, "good.state")
	otherPath, _ := save(other, 40, "other.state")
	hlen := int(binary.LittleEndian.Uint64(img))

	s, _ := m.NewSession(SessionOptions{MaxContext: 256})
	if _, err := s.Prefill(ctx, testPrompt(m, 17, 4), PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	expect := func(what, path string, sentinel error, words ...string) {
		t.Helper()
		err := s.LoadStateFile(path)
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: %v, want %v", what, err, sentinel)
		}
		for _, w := range append([]string{path}, words...) {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q does not say %q", what, err, w)
			}
		}
		unchanged(t, s, before, what)
	}

	for _, cut := range []int{0, 5, 8, 8 + hlen/2, 8 + hlen, 8 + hlen + 1000, len(img) - 1} {
		expect("a file cut at byte "+strconv.Itoa(cut), write("cut.state", img[:cut]), ErrCheckpoint)
	}
	expect("truncated data", write("cut.state", img[:len(img)-4]), ErrCheckpoint, "truncated")
	expect("trailing bytes", write("long.state", append(slices.Clone(img), 0)), ErrCheckpoint, "trailing")
	expect("another model's file", otherPath, ErrInvalidArgument, "qwen3_next")
	expect("a missing file", filepath.Join(dir, "none.state"), ErrCheckpoint)
	expect("not a safetensors file", write("text.state", []byte("hello, world: not a state file")), ErrCheckpoint)
	expect("a safetensors file of weights", testdata("goldens", "op_gdn.safetensors"), ErrCheckpoint, "not a strata session state file")

	// One flipped bit in every byte of the header (the padding included): every one refused.
	for i := range 8 + hlen {
		b := slices.Clone(img)
		b[i] ^= 1 << (i % 8)
		p := write("flip.state", b)
		err := s.LoadStateFile(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("header byte %d flipped (%q): %v, want an error naming the file", i, b[max(i-30, 0):min(i+30, len(b))], err)
		}
		unchanged(t, s, before, "a flipped header bit")
	}
	// Flipped bits in the data section: every one caught by the checksum.
	r := rand.New(rand.NewPCG(5, 6))
	for range 64 {
		i := 8 + hlen + r.IntN(len(img)-8-hlen)
		b := slices.Clone(img)
		b[i] ^= 1 << r.IntN(8)
		expect("a flipped data bit", write("flip.state", b), ErrCheckpoint, "data checksum")
	}

	// A newer format version (with a valid header checksum).
	meta, _ := stateMetadata(m, 40)
	meta[mdVersion] = "2"
	ls, err := readStateFile(m, 256, good)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := writeState(&buf, "v2", meta, stateTensors(m, ls.pos, ls.ids, ls.st.liveSource(ls.pos), nil)); err != nil {
		t.Fatal(err)
	}
	ls.st.free(m.dev.be)
	expect("a newer format version", write("v2.state", buf.Bytes()), ErrUnsupported, "format version 2 is newer")

	// More tokens than the session holds.
	small, _ := m.NewSession(SessionOptions{MaxContext: 32})
	if err := small.LoadStateFile(good); !errors.Is(err, ErrCapacity) || !strings.Contains(err.Error(), "holds 40 tokens") {
		t.Fatalf("a 40-token file into a 32-token session: %v, want ErrCapacity", err)
	}
	if small.Position() != 0 {
		t.Fatal("a refused file changed the session")
	}
	if err := s.LoadStateFile(good); err != nil || s.Position() != 40 {
		t.Fatalf("the good file: %v (position %d)", err, s.Position())
	}
	fp, _ := m.Fingerprint()
	in, err := ReadStateInfo(good)
	if err != nil || in.Position != 40 || in.Family != "qwen4_exp" || in.Fingerprint != fp || in.Layers != [2]int{0, 4} ||
		in.NumLayers != 4 || in.Backend != "cpu" || in.Version != StateVersion || in.Bytes != int64(len(img)) || in.Logits {
		t.Fatalf("ReadStateInfo: %+v, %v", in, err)
	}
	if _, err := ReadStateInfo(filepath.Join(dir, "v2.state")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ReadStateInfo of a newer version: %v", err)
	}
}

// TestStateFileStages: a pipeline stage's file holds its layers' states only and is refused by
// another stage and by the whole model; the stage fed Hidden keeps the token ids; a stage's file
// continues the pipeline bitwise.
func TestStateFileStages(t *testing.T) {
	ctx := context.Background()
	dev, err := Open(Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	load := func(lo, hi int) *Model {
		m, err := LoadModel(dev, testdata("qwen4exp-tiny"), LoadOptions{Layers: [2]int{lo, hi}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	first, second, whole := load(0, 2), load(2, 4), load(0, 0)
	prompt := testPrompt(whole, 50, 7)
	s1, _ := first.NewSession(SessionOptions{MaxContext: 64})
	s2, _ := second.NewSession(SessionOptions{MaxContext: 64})
	h, err := s1.Prefill(ctx, prompt[:30], PrefillOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Prefill(ctx, prompt[:30], PrefillOptions{Hidden: h.Hidden}); err != nil {
		t.Fatal(err)
	}
	if toks, _ := s2.Tokens(); !slices.Equal(toks, prompt[:30]) {
		t.Fatal("the second stage (fed Hidden) does not hold the token ids")
	}
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "first.state"), filepath.Join(dir, "second.state")
	if err := s1.SaveStateFile(p1); err != nil {
		t.Fatal(err)
	}
	if err := s2.SaveStateFile(p2); err != nil {
		t.Fatal(err)
	}
	ws, _ := whole.NewSession(SessionOptions{MaxContext: 64})
	for _, c := range []struct {
		s    *Session
		path string
		says string
	}{{s2, p1, "layers 0:2 of 4, this model loads layers 2:4"}, {s1, p2, "layers 2:4"}, {ws, p1, "this model loads layers 0:4"}} {
		before, _ := c.s.Snapshot()
		if err := c.s.LoadStateFile(c.path); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("%s into another stage: %v, want ErrInvalidArgument saying %q", c.path, err, c.says)
		}
		unchanged(t, c.s, before, "another stage's file")
	}
	// Both stages reloaded from their files continue the pipeline bitwise.
	n1, _ := first.NewSession(SessionOptions{MaxContext: 64})
	n2, _ := second.NewSession(SessionOptions{MaxContext: 64})
	if err := n1.LoadStateFile(p1); err != nil {
		t.Fatal(err)
	}
	if err := n2.LoadStateFile(p2); err != nil {
		t.Fatal(err)
	}
	run := func(a, b *Session) []float32 {
		h, err := a.Prefill(ctx, prompt[30:], PrefillOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lg, err := b.Prefill(ctx, prompt[30:], PrefillOptions{Hidden: h.Hidden, AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		return lg.Data
	}
	if !bitwiseEqual(run(n1, n2), run(s1, s2)) {
		t.Fatal("stages loaded from their files continue differently")
	}
}

// TestFingerprint: the same checkpoint in another directory, with its config.json re-indented,
// has the same fingerprint (its state files load); the same shapes with one weight byte
// changed, or with weights drawn from another seed, have other fingerprints, and each refuses
// the other's state file.
func TestFingerprint(t *testing.T) {
	ctx := context.Background()
	src := testdata("qwen3next-tiny")
	copyDir := func(edit func(dir string)) string {
		dir := t.TempDir()
		entries, _ := os.ReadDir(src)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if e.Name() == "config.json" {
				var ind bytes.Buffer
				if err := json.Indent(&ind, b, "", "        "); err != nil {
					t.Fatal(err)
				}
				b = ind.Bytes()
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(dir)
		}
		return dir
	}
	dev, _ := Open(Options{Backend: "cpu"})
	load := func(dir string) *Model {
		m, err := LoadModel(dev, dir, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	// One byte in the middle of a tensor (where the per-tensor sample reads) changed.
	flipMiddle := func(dir string) {
		ck, err := safetensors.OpenDirHeaders(dir)
		if err != nil {
			t.Fatal(err)
		}
		f := ck.Files()[0]
		tn, _ := f.Tensor(f.Names()[len(f.Names())/2])
		b, e := tn.Offsets()
		ck.Close()
		raw, _ := os.ReadFile(f.Path)
		raw[f.DataStart()+(b+e)/2] ^= 0x10
		os.WriteFile(f.Path, raw, 0o644)
	}
	// One byte outside every window: a quarter into the largest tensor (not its middle 64 bytes,
	// and past the shard's first 4 KiB).
	flipOutside := func(dir string) {
		ck, err := safetensors.OpenDirHeaders(dir)
		if err != nil {
			t.Fatal(err)
		}
		var f *safetensors.File
		var b, e int64
		for _, sf := range ck.Files() {
			for _, n := range sf.Names() {
				tn, _ := sf.Tensor(n)
				if tb, te := tn.Offsets(); te-tb > e-b {
					f, b, e = sf, tb, te
				}
			}
		}
		ck.Close()
		off := b + (e-b)/4
		if off < fingerprintWindow || off > f.DataSize()/2-fingerprintWindow && off < f.DataSize()/2+fingerprintWindow || off > f.DataSize()-fingerprintWindow {
			t.Fatalf("byte %d of %s lies in a window: pick another", off, f.Path)
		}
		raw, _ := os.ReadFile(f.Path)
		raw[f.DataStart()+off] ^= 0x10
		os.WriteFile(f.Path, raw, 0o644)
	}
	if a, b := load(src), load(copyDir(flipOutside)); func() bool { x, _ := a.Fingerprint(); y, _ := b.Fingerprint(); return x != y }() {
		t.Fatal("a byte outside every window changed the fingerprint: the docs say it covers only the windows")
	}
	other := t.TempDir()
	spec := modelgen.Presets["qwen3next-small"]
	spec.Layers, spec.Vocab = 4, 512
	gen := func(seed uint64) string {
		d := filepath.Join(other, fmt.Sprint(seed))
		spec.Seed = seed
		if err := modelgen.Generate(d, spec); err != nil {
			t.Fatal(err)
		}
		return d
	}
	orig, same, flipped := load(src), load(copyDir(nil)), load(copyDir(flipMiddle))
	genA, genB := load(gen(1)), load(gen(2))
	fp := func(m *Model) string {
		v, err := m.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if fp(orig) != fp(same) {
		t.Fatal("a copy of the checkpoint with config.json re-indented has another fingerprint")
	}
	if fp(orig) == fp(flipped) || fp(genA) == fp(genB) {
		t.Fatal("checkpoints of the same shapes with other weights have the same fingerprint")
	}
	pair := func(a, b *Model, ok bool) {
		s, _ := a.NewSession(SessionOptions{MaxContext: 64})
		if _, err := s.Prefill(ctx, testPrompt(a, 20, 8), PrefillOptions{}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "s.state")
		if err := s.SaveStateFile(path); err != nil {
			t.Fatal(err)
		}
		err := must(b.NewSession(SessionOptions{MaxContext: 64})).LoadStateFile(path)
		switch {
		case ok && err != nil:
			t.Fatalf("the same checkpoint copied: %v", err)
		case !ok && (!errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "another checkpoint")):
			t.Fatalf("another checkpoint's file: %v, want ErrInvalidArgument naming another checkpoint", err)
		}
	}
	pair(orig, same, true)
	pair(orig, flipped, false)
	pair(genA, genB, false)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSessionTokens: a session holds the ids of its content: a prefill appends them (a failed
// one does not), Reset empties them, Snapshot and Restore carry them.
func TestSessionTokens(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen3next-tiny")
	p := testPrompt(m, 60, 9)
	s, _ := m.NewSession(SessionOptions{MaxContext: 64})
	check := func(want []int32, what string) {
		t.Helper()
		got, err := s.Tokens()
		if err != nil || !slices.Equal(got, want) || s.Position() != len(want) {
			t.Fatalf("%s: tokens %v (position %d), want %d tokens", what, got, s.Position(), len(want))
		}
	}
	check(nil, "new session")
	s.Prefill(ctx, p[:20], PrefillOptions{Step: 7})
	s.Prefill(ctx, p[20:30], PrefillOptions{})
	check(p[:30], "two prefills")
	sn, _ := s.Snapshot()
	if !slices.Equal(sn.Tokens(), p[:30]) {
		t.Fatal("snapshot tokens")
	}
	if _, err := s.Prefill(ctx, p[30:], PrefillOptions{Step: 10, Progress: func(done, total int) {
		if done > 5 {
			panic("stop")
		}
	}}); err == nil {
		t.Fatal("a panicking progress callback did not fail the prefill")
	}
	check(p[:30], "a failed prefill")
	s.Prefill(ctx, p[30:40], PrefillOptions{})
	s.Restore(sn)
	check(p[:30], "restore")
	s.Reset()
	check(nil, "reset")
}

// TestWriteFileAtomic: a write that fails half-way leaves the file as it was and no temporary
// file behind; a directory that does not exist is an error naming the file.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.state")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("new"), 1<<20))
		return errors.New("disk full")
	})
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failed write: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("a failed write changed the file: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a failed write left %d files", len(entries))
	}
	m := loadTiny(t, "qwen3next-tiny")
	s, _ := m.NewSession(SessionOptions{MaxContext: 16})
	missing := filepath.Join(dir, "no", "such", "dir", "s.state")
	if err := s.SaveStateFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("saving into a missing directory: %v", err)
	}
}

// TestStateFilePLEContext: a state file with valid checksums whose PLE token context is out of
// the vocabulary, or in it but not the last ids of the file's own tokens, is refused at load
// naming the tensor, and the session is unchanged.
func TestStateFilePLEContext(t *testing.T) {
	ctx := context.Background()
	m := loadTiny(t, "qwen4exp-tiny")
	dir := t.TempDir()
	s, _ := m.NewSession(SessionOptions{MaxContext: 256})
	if _, err := s.Prefill(ctx, testPrompt(m, 40, 3), PrefillOptions{}); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.state")
	if err := s.SaveStateFile(good); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Snapshot()
	ls, err := readStateFile(m, 256, good)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.st.free(m.dev.be)
	meta, _ := stateMetadata(m, ls.pos)
	layers := 0
	for layer, c := range ls.st.pleCtx {
		layers++
		if want := [2]int32{ls.ids[38], ls.ids[39]}; *c != want {
			t.Fatalf("layer %d: a saved PLE context %v, want the last two ids %v", layer, *c, want)
		}
		for _, bad := range [][2]int32{{c[0], int32(m.cfg.Vocab) + 7}, {c[1], c[0]}, {c[0], (c[1] + 1) % int32(m.cfg.Vocab)}} {
			src := ls.st.liveSource(ls.pos)
			src.ple[layer] = bad
			var buf bytes.Buffer
			if _, err := writeState(&buf, "bad", meta, stateTensors(m, ls.pos, ls.ids, src, nil)); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "bad.state")
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			err := s.LoadStateFile(p)
			want := fmt.Sprintf("layers.%d.ple_tokens is %v", layer, bad)
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("PLE context %v: %v, want ErrCheckpoint saying %q", bad, err, want)
			}
			unchanged(t, s, before, "a wrong PLE context")
		}
	}
	if layers == 0 {
		t.Fatal("qwen4exp-tiny has no PLE layer: the test checks nothing")
	}
}
