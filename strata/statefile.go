package strata

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/internal/safetensors"
	"github.com/stratakernels/strata/op"
)

// A session state file is one safetensors file (so numpy, safetensors and MLX read it) holding
// every state of a session by layer and role, the token ids it was made from, and metadata that
// ties it to one model and stage. Tensors:
//
//	tokens              I32 [pos]                  the token ids, one per position
//	layers.{i}.{role}   F32 [pos, shape...]        a per-token state (k, v, index_keys): the first pos rows
//	layers.{i}.{role}   F32 [shape...]             a fixed-size state (conv, recurrent, ple_conv)
//	layers.{i}.ple_tokens I32 [2]                  the PLE token context
//	logits              F32 [vocab], optional      the next-token logits after the last token (prompt-cache checkpoints)
//
// with i the checkpoint's layer index and the roles of family.State. Metadata (all strings):
// format ("strata.session"), format_version, family, model_type, model_fingerprint
// (Model.Fingerprint), layers ("lo:hi", the stage) and num_layers, position, backend (the
// backend that wrote it; informational: a file loads on any backend), compute (the compute mode
// of the model that wrote it, LoadOptions.Compute; a file loads only into a model of the same
// mode, and a file without it was written in f32), data_crc32c (CRC-32C of the
// data section, 8 hex digits) and header_crc32c (CRC-32C of the file's first 8 + N bytes, the
// length and the JSON header with its padding, as written with this value's 8 digits all "0").
// safetensors has no checksum of its own; these two catch truncation and flipped bits anywhere
// in the file. They are defined so in every format version: a reader checks header_crc32c
// before it reads format_version.
const (
	// StateFormat is the metadata "format" of a session state file.
	StateFormat = "strata.session"
	// StateVersion is the state file format version this strata writes; it reads versions up to it.
	StateVersion = 1
)

const (
	mdFormat      = "format"
	mdVersion     = "format_version"
	mdFamily      = "family"
	mdModelType   = "model_type"
	mdFingerprint = "model_fingerprint"
	mdCompute     = "compute"
	mdLayers      = "layers"
	mdNumLayers   = "num_layers"
	mdPosition    = "position"
	mdBackend     = "backend"
	mdHeaderCRC   = "header_crc32c"
	mdDataCRC     = "data_crc32c"
	tensorTokens  = "tokens"
	tensorLogits  = "logits"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stateTensor is one tensor of a state file: its name, dtype (F32 or I32) and shape, and
// the elements it is written from (f or i as the dtype says; none in a table of shapes only).
type stateTensor struct {
	name  string
	dt    safetensors.DType
	shape []int64
	f     []float32
	i     []int32
}

// elems is the element count the shape implies.
func (t *stateTensor) elems() int {
	n := 1
	for _, d := range t.shape {
		n *= int(d)
	}
	return n
}

// stateName is the tensor name of a layer's state.
func stateName(s family.State) string { return fmt.Sprintf("layers.%d.%s", s.Layer, s.Role) }

// stateShape is the shape a state has in a file of pos tokens.
func stateShape(s family.State, pos int) []int64 {
	var out []int64
	if s.Row > 0 {
		out = append(out, int64(pos))
	}
	for _, d := range s.Shape {
		out = append(out, int64(d))
	}
	return out
}

// stateSource is where a state image's elements come from: the device states' valid elements
// in the cache's order (the live cache's memory, or a snapshot's copies) and the PLE contexts.
type stateSource struct {
	dev [][]float32
	ple map[int][2]int32
}

// liveSource views the cache's first pos tokens without copying.
func (c *cache) liveSource(pos int) stateSource {
	src := stateSource{ple: map[int][2]int32{}}
	for _, st := range c.states {
		n := st.t.Len()
		if st.row > 0 {
			n = pos * st.row
		}
		src.dev = append(src.dev, st.t.F32()[:n])
	}
	for i, x := range c.pleCtx {
		src.ple[i] = *x
	}
	return src
}

// stateTable lists the tensors of a state file of m's session holding pos tokens, without
// their elements, in the order of the data section (tokens, the states in layer order).
func stateTable(m *Model, pos int) []stateTensor {
	ts := []stateTensor{{name: tensorTokens, dt: safetensors.I32, shape: []int64{int64(pos)}}}
	for _, s := range sessionStates(m) {
		dt := safetensors.F32
		if s.DType == op.I32 {
			dt = safetensors.I32
		}
		ts = append(ts, stateTensor{name: stateName(s), dt: dt, shape: stateShape(s, pos)})
	}
	return ts
}

// stateTensors is stateTable with the elements: the token ids, the states from src, and the
// logits when not nil.
func stateTensors(m *Model, pos int, ids []int32, src stateSource, logits []float32) []stateTensor {
	ts := stateTable(m, pos)
	ts[0].i = ids
	k := 0
	for j, s := range sessionStates(m) {
		t := &ts[j+1]
		switch {
		case s.Host:
			ctx := src.ple[s.Layer]
			t.i = ctx[:]
		default:
			t.f = src.dev[k]
			k++
		}
	}
	if logits != nil {
		ts = append(ts, stateTensor{name: tensorLogits, dt: safetensors.F32, shape: []int64{int64(len(logits))}, f: logits})
	}
	return ts
}

// stateMetadata is the metadata of a state file of m's session at pos (without the checksums).
func stateMetadata(m *Model, pos int) (map[string]string, error) {
	fp, err := m.Fingerprint()
	if err != nil {
		return nil, err
	}
	return map[string]string{
		mdFormat:      StateFormat,
		mdVersion:     strconv.Itoa(StateVersion),
		mdFamily:      m.Arch(),
		mdModelType:   m.cfg.ModelType,
		mdFingerprint: fp,
		mdLayers:      fmt.Sprintf("%d:%d", m.lo, m.hi),
		mdNumLayers:   strconv.Itoa(m.cfg.Layers),
		mdPosition:    strconv.Itoa(pos),
		mdBackend:     m.dev.be.Name(),
		mdCompute:     m.mode.String(),
	}, nil
}

// crcPlaceholder is header_crc32c while the header's checksum is computed.
const crcPlaceholder = "00000000"

// headerCRC is header_crc32c of a header (its 8-byte length and JSON): the CRC-32C of those
// bytes with the value of header_crc32c read as crcPlaceholder. at is where the value starts
// (-1 when the header holds no such key, or holds it more than once).
func headerCRC(raw []byte) (crc uint32, at int) {
	key := []byte(`"` + mdHeaderCRC + `":"`)
	at = bytes.Index(raw, key)
	if at < 0 || bytes.Count(raw, key) != 1 || at+len(key)+8 > len(raw) {
		return 0, -1
	}
	at += len(key)
	c := crc32.Update(0, castagnoli, raw[:at])
	c = crc32.Update(c, castagnoli, []byte(crcPlaceholder))
	return crc32.Update(c, castagnoli, raw[at+8:]), at
}

// chunkElems is how many 4-byte elements are converted to or from bytes at a time.
const chunkElems = 1 << 18

// eachChunk calls fn with the little-endian bytes of t's elements, chunkElems at a time, in buf.
func (t *stateTensor) eachChunk(buf []byte, fn func([]byte) error) error {
	n := t.elems()
	for at := 0; at < n; at += chunkElems {
		k := min(chunkElems, n-at)
		b := buf[:4*k]
		if t.dt == safetensors.I32 {
			for j, v := range t.i[at : at+k] {
				binary.LittleEndian.PutUint32(b[4*j:], uint32(v))
			}
		} else {
			for j, v := range t.f[at : at+k] {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
			}
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// writeState writes a state file of the tensors (in that order in the data section) with the
// metadata plus both checksums to w, and returns the bytes written. name names the file in
// errors.
func writeState(w io.Writer, name string, meta map[string]string, ts []stateTensor) (int64, error) {
	buf := make([]byte, 4*chunkElems)
	dataCRC := crc32.New(castagnoli)
	wts := make([]safetensors.WriteTensor, len(ts))
	for i := range ts {
		t := &ts[i]
		if held := map[safetensors.DType]int{safetensors.F32: len(t.f), safetensors.I32: len(t.i)}[t.dt]; held != t.elems() {
			return 0, wrapf(ErrShape, nil, "%s: state %s holds %d elements, its shape %v needs %d", name, t.name, held, t.shape, t.elems())
		}
		wts[i] = safetensors.WriteTensor{Name: t.name, DType: t.dt, Shape: t.shape}
		if err := t.eachChunk(buf, func(b []byte) error { dataCRC.Write(b); return nil }); err != nil {
			return 0, err
		}
	}
	md := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		md[k] = v
	}
	md[mdDataCRC] = fmt.Sprintf("%08x", dataCRC.Sum32())
	md[mdHeaderCRC] = crcPlaceholder
	head, _, err := safetensors.EncodeHeader(name, wts, md)
	if err != nil {
		return 0, wrapf(ErrInvalidArgument, err, "state file %s", name)
	}
	crc, at := headerCRC(head)
	if at < 0 {
		return 0, wrapf(ErrInvalidArgument, nil, "state file %s: metadata holds %s more than once", name, mdHeaderCRC)
	}
	copy(head[at:], fmt.Sprintf("%08x", crc))
	cw := &countWriter{w: w}
	if _, err := cw.Write(head); err != nil {
		return cw.n, err
	}
	for i := range ts {
		if err := ts[i].eachChunk(buf, func(b []byte) error { _, err := cw.Write(b); return err }); err != nil {
			return cw.n, err
		}
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	k, err := c.w.Write(b)
	c.n += int64(k)
	return k, err
}

// loadedState is a state file read into a fresh cache of the model's session (not yet the
// session's).
type loadedState struct {
	pos    int
	ids    []int32
	st     *cache
	logits []float32 // nil when the file has none
	bytes  int64     // the file's size: header and data section
}

// stateError wraps sentinel with a message naming the state file.
func stateError(sentinel error, cause error, name, format string, args ...any) error {
	return wrapf(sentinel, cause, "state file %s: %s", name, fmt.Sprintf(format, args...))
}

// readState reads one state file of m's session from r into a fresh cache of maxCtx tokens,
// checking it as it goes: the safetensors header, the format and version, the header checksum,
// the model (family, fingerprint, stage), the tensor table against the model's states, the
// position against maxCtx, the data checksum and the token ids. Errors name the file and what
// does not match, wrap ErrCheckpoint (not a state file, truncated, corrupt), ErrUnsupported (a
// newer format version), ErrInvalidArgument (another model's or stage's file), ErrCapacity or
// ErrOutOfMemory; on error nothing is left allocated.
func readState(m *Model, maxCtx int, name string, r io.Reader) (*loadedState, error) {
	f, raw, err := safetensors.ReadHeader(name, r)
	if err != nil {
		return nil, stateError(ErrCheckpoint, err, name, "not a readable safetensors file")
	}
	md := f.Metadata
	if _, err := checkStateHeader(name, md, raw); err != nil {
		return nil, err
	}
	names := f.Names()
	if err := checkStateModel(m, name, md); err != nil {
		return nil, err
	}
	pos, err := strconv.Atoi(md[mdPosition])
	if err != nil || pos < 0 {
		return nil, stateError(ErrCheckpoint, nil, name, "position %q is not a token count", md[mdPosition])
	}
	if pos > maxCtx {
		return nil, stateError(ErrCapacity, nil, name, "holds %d tokens, the session's capacity is %d", pos, maxCtx)
	}
	want := stateTable(m, pos)
	wantNames := map[string]*stateTensor{}
	for i := range want {
		wantNames[want[i].name] = &want[i]
	}
	hasLogits := false
	for _, n := range names {
		t, _ := f.Tensor(n)
		if n == tensorLogits {
			if m.hi != m.cfg.Layers || t.DType != safetensors.F32 || !slices.Equal(t.Shape, []int64{int64(m.cfg.Vocab)}) {
				return nil, stateError(ErrInvalidArgument, nil, name, "tensor logits is %s %v, this model's logits are F32 [%d]", t.DType, t.Shape, m.cfg.Vocab)
			}
			hasLogits = true
			continue
		}
		w, ok := wantNames[n]
		if !ok {
			return nil, stateError(ErrInvalidArgument, nil, name, "tensor %s is not a state of this model's session", n)
		}
		if t.DType != w.dt || !slices.Equal(t.Shape, w.shape) {
			return nil, stateError(ErrInvalidArgument, nil, name, "tensor %s is %s %v, this model's session holds %s %v at position %d", n, t.DType, t.Shape, w.dt, w.shape, pos)
		}
	}
	for _, w := range want {
		if _, err := f.Tensor(w.name); err != nil {
			return nil, stateError(ErrInvalidArgument, nil, name, "has no tensor %s, a state of this model's session", w.name)
		}
	}
	st, err := newCache(m, maxCtx)
	if err != nil {
		return nil, err
	}
	ls := &loadedState{pos: pos, ids: make([]int32, pos), st: st, bytes: f.DataStart() + f.DataSize()}
	if hasLogits {
		ls.logits = make([]float32, m.cfg.Vocab)
	}
	if err := ls.readData(m, name, f, r); err != nil {
		st.free(m.dev.be)
		return nil, err
	}
	for i, id := range ls.ids {
		if id < 0 || int(id) >= m.cfg.Vocab {
			st.free(m.dev.be)
			return nil, stateError(ErrCheckpoint, nil, name, "token %d at position %d is outside the vocabulary [0, %d)", id, i, m.cfg.Vocab)
		}
	}
	for layer, ctx := range ls.st.pleCtx {
		// The PLE token context is the last two ids of the history eos, eos, ids[0..pos-1]
		// (op.PLEHash.IDs): anything else would hash the next tokens from the wrong n-grams.
		want := m.layerAt(layer).hash.InitialContext()
		hist := append(want[:], ls.ids...)
		want = [2]int32{hist[len(hist)-2], hist[len(hist)-1]}
		if *ctx != want {
			st.free(m.dev.be)
			return nil, stateError(ErrCheckpoint, nil, name, "layers.%d.ple_tokens is %v, but the file's last token ids (eos %d before the first) make it %v", layer, *ctx, m.layerAt(layer).hash.Eos, want)
		}
	}
	return ls, nil
}

// checkStateHeader checks a state file's header (raw: its first bytes, metadata md): the
// format name, header_crc32c, then the format version, which it returns.
func checkStateHeader(name string, md map[string]string, raw []byte) (int, error) {
	if md[mdFormat] != StateFormat {
		return 0, stateError(ErrCheckpoint, nil, name, "metadata format is %q, not %q: not a strata session state file", md[mdFormat], StateFormat)
	}
	got, at := headerCRC(raw)
	if want := md[mdHeaderCRC]; at < 0 || want != fmt.Sprintf("%08x", got) {
		return 0, stateError(ErrCheckpoint, nil, name, "header checksum %08x does not match header_crc32c %q: the header is corrupt", got, want)
	}
	ver, err := strconv.Atoi(md[mdVersion])
	switch {
	case err != nil || ver < 1:
		return 0, stateError(ErrCheckpoint, nil, name, "format_version %q is not a version number", md[mdVersion])
	case ver > StateVersion:
		return 0, stateError(ErrUnsupported, nil, name, "format version %d is newer than the version %d this strata reads (written by a newer strata)", ver, StateVersion)
	}
	return ver, nil
}

// checkStateModel compares a state file's model metadata with m.
func checkStateModel(m *Model, name string, md map[string]string) error {
	if md[mdFamily] != m.Arch() {
		return stateError(ErrInvalidArgument, nil, name, "made by a %s model, this model is %s", md[mdFamily], m.Arch())
	}
	fp, err := m.Fingerprint()
	if err != nil {
		return err
	}
	if md[mdFingerprint] != fp {
		return stateError(ErrInvalidArgument, nil, name, "made by another checkpoint: model_fingerprint %.16s..., this model's (%s) is %.16s...", md[mdFingerprint], m.dir, fp)
	}
	// A file without the key was written before compute modes existed: in f32.
	if mode := cmp.Or(md[mdCompute], op.ComputeF32.String()); mode != m.mode.String() {
		return stateError(ErrInvalidArgument, nil, name, "made in compute mode %s, this model runs %s (LoadOptions.Compute): its continuation would not have the bits of either", mode, m.mode)
	}
	if stage := fmt.Sprintf("%d:%d", m.lo, m.hi); md[mdLayers] != stage || md[mdNumLayers] != strconv.Itoa(m.cfg.Layers) {
		return stateError(ErrInvalidArgument, nil, name, "holds the states of layers %s of %s, this model loads layers %s of %d (LoadOptions.Layers)", md[mdLayers], md[mdNumLayers], stage, m.cfg.Layers)
	}
	return nil
}

// readData reads the data section in offset order into the loaded state's cache, ids and
// logits, and checks data_crc32c.
func (ls *loadedState) readData(m *Model, name string, f *safetensors.File, r io.Reader) error {
	type dst struct {
		f []float32
		i []int32
	}
	byName := map[string]dst{tensorTokens: {i: ls.ids}, tensorLogits: {f: ls.logits}}
	for _, s := range sessionStates(m) {
		n := stateName(s)
		if s.Host {
			byName[n] = dst{i: ls.st.pleCtx[s.Layer][:]}
			continue
		}
		t := ls.st.at[stateKey{s.Layer, s.Role}].t
		switch t.DType() {
		case op.I32:
			byName[n] = dst{i: t.I32()[:s.Len(ls.pos)]}
		default:
			byName[n] = dst{f: t.F32()[:s.Len(ls.pos)]}
		}
	}
	names := f.Names()
	sort.Slice(names, func(a, b int) bool {
		ta, _ := f.Tensor(names[a])
		tb, _ := f.Tensor(names[b])
		ba, _ := ta.Offsets()
		bb, _ := tb.Offsets()
		return ba < bb
	})
	crc := crc32.New(castagnoli)
	buf := make([]byte, 4*chunkElems)
	var done int64
	for _, n := range names {
		d := byName[n]
		if err := readElems(r, crc, buf, d.f, d.i, func(read int64, err error) error {
			return stateError(ErrCheckpoint, nil, name, "truncated: the data section ends %d bytes in, inside tensor %s (it needs %d bytes)", done+read, n, f.DataSize())
		}); err != nil {
			return err
		}
		t, _ := f.Tensor(n)
		done += t.ByteSize()
	}
	if want := f.Metadata[mdDataCRC]; want != fmt.Sprintf("%08x", crc.Sum32()) {
		return stateError(ErrCheckpoint, nil, name, "data checksum %08x does not match data_crc32c %q: the state data is corrupt", crc.Sum32(), want)
	}
	return nil
}

// readElems fills f (or i) with little-endian elements read from r, hashing the bytes into crc;
// short reports a stream that ends early with the bytes of this tensor read.
func readElems(r io.Reader, crc hash.Hash32, buf []byte, f []float32, i []int32, short func(read int64, err error) error) error {
	n := len(f) + len(i)
	for at := 0; at < n; at += chunkElems {
		k := min(chunkElems, n-at)
		b := buf[:4*k]
		if got, err := io.ReadFull(r, b); err != nil {
			return short(int64(4*at+got), err)
		}
		crc.Write(b)
		if f == nil {
			for j := range k {
				i[at+j] = int32(binary.LittleEndian.Uint32(b[4*j:]))
			}
		} else {
			for j := range k {
				f[at+j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
			}
		}
	}
	return nil
}

// SaveState writes the session's whole state to w as one session state file (safetensors; the
// format is described in the README and above): every state by layer and role (per-token states
// for the session's position only), the token ids, the position and the model's fingerprint
// and stage. It holds the session while it writes. Errors wrap ErrBusy, ErrClosed,
// ErrCheckpoint (the model's files could not be read for the fingerprint) or the writer's error.
func (s *Session) SaveState(w io.Writer) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	_, err := s.saveLocked(w, "(writer)")
	return err
}

func (s *Session) saveLocked(w io.Writer, name string) (int64, error) {
	meta, err := stateMetadata(s.m, s.pos)
	if err != nil {
		return 0, err
	}
	return writeState(w, name, meta, stateTensors(s.m, s.pos, s.ids, s.state.liveSource(s.pos), nil))
}

// SaveStateFile writes the session's state (SaveState) to path atomically through WriteFile:
// into a temporary file in the same directory, flushed to disk (fsync), then renamed over path,
// so that path holds either its old content or the whole new file, never a part (a temporary
// left by a killed process is removed by the next write to path). Errors name the file.
func (s *Session) SaveStateFile(path string) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	return WriteFile(path, func(w io.Writer) error {
		_, err := s.saveLocked(w, path)
		return err
	})
}

// LoadState replaces the session's state with one read from r (a file SaveState wrote, or a
// prompt-cache checkpoint): its position, token ids and every state. The file must come from
// the same checkpoint (Model.Fingerprint) and stage (LoadOptions.Layers), on any backend. The
// file is read and checked whole into a new cache before the session's is replaced, so on error
// the session is unchanged. Errors name what does not match and wrap ErrCheckpoint (not a state
// file, truncated, a checksum mismatch), ErrUnsupported (a newer format version),
// ErrInvalidArgument (another model's, checkpoint's or stage's file), ErrCapacity (more tokens
// than MaxContext), ErrOutOfMemory, ErrBusy or ErrClosed.
func (s *Session) LoadState(r io.Reader) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	ls, err := readState(s.m, s.maxCtx, "(reader)", r)
	if err != nil {
		return err
	}
	s.swapState(ls.st, ls.pos, ls.ids)
	return nil
}

// LoadStateFile is LoadState from the file at path; it also refuses a file with bytes after
// the data section. Errors name the file.
func (s *Session) LoadStateFile(path string) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	ls, err := readStateFile(s.m, s.maxCtx, path)
	if err != nil {
		return err
	}
	s.swapState(ls.st, ls.pos, ls.ids)
	return nil
}

// openStateFile opens a state file for reading; a directory or anything but a regular file is
// refused by name (ErrCheckpoint), before any byte is read.
func openStateFile(path string) (*os.File, error) {
	// Stat first: opening a FIFO would block until a writer came.
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, stateError(ErrCheckpoint, nil, path, "is not a regular file (%s), not a state file", fi.Mode().Type())
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, stateError(ErrCheckpoint, err, path, "cannot open")
	}
	fi, err := fd.Stat()
	switch {
	case err != nil:
		fd.Close()
		return nil, stateError(ErrCheckpoint, err, path, "cannot open")
	case fi.IsDir():
		fd.Close()
		return nil, stateError(ErrCheckpoint, nil, path, "is a directory, not a state file")
	case !fi.Mode().IsRegular():
		fd.Close()
		return nil, stateError(ErrCheckpoint, nil, path, "is not a regular file (%s), not a state file", fi.Mode().Type())
	}
	return fd, nil
}

// readStateFile is readState from a file, whose size must be that of the state it holds.
func readStateFile(m *Model, maxCtx int, path string) (*loadedState, error) {
	fd, err := openStateFile(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	ls, err := readState(m, maxCtx, path, bufio.NewReaderSize(fd, 1<<20))
	if err != nil {
		return nil, err
	}
	if fi, err := fd.Stat(); err == nil && fi.Size() != ls.bytes {
		ls.st.free(m.dev.be)
		return nil, stateError(ErrCheckpoint, nil, path, "file is %d bytes, its state ends at byte %d (%d trailing bytes)", fi.Size(), ls.bytes, fi.Size()-ls.bytes)
	}
	return ls, nil
}

// StateInfo describes a session state file (ReadStateInfo).
type StateInfo struct {
	Position    int    // tokens held
	Family      string // the model family that wrote it (Model.Arch)
	ModelType   string
	Fingerprint string // Model.Fingerprint of its checkpoint
	Layers      [2]int // the stage [lo, hi) of NumLayers
	NumLayers   int
	Backend     string // the backend that wrote it
	Compute     string // the compute mode of the model that wrote it (LoadOptions.Compute)
	Version     int    // format version
	Bytes       int64  // header and data section
	Logits      bool   // whether it holds the next-token logits (a prompt-cache checkpoint)
}

// ReadStateInfo reads a state file's header (not its data: the data checksum is checked by
// LoadStateFile) and describes it. Errors name the file and wrap ErrCheckpoint (not a state
// file, a header checksum mismatch) or ErrUnsupported (a newer format version).
func ReadStateInfo(path string) (StateInfo, error) {
	var in StateInfo
	fd, err := openStateFile(path)
	if err != nil {
		return in, err
	}
	defer fd.Close()
	f, raw, err := safetensors.ReadHeader(path, bufio.NewReader(fd))
	if err != nil {
		return in, stateError(ErrCheckpoint, err, path, "not a readable safetensors file")
	}
	md := f.Metadata
	if in.Version, err = checkStateHeader(path, md, raw); err != nil {
		return in, err
	}
	in.Position, _ = strconv.Atoi(md[mdPosition])
	in.Family, in.ModelType, in.Fingerprint, in.Backend = md[mdFamily], md[mdModelType], md[mdFingerprint], md[mdBackend]
	in.Compute = cmp.Or(md[mdCompute], op.ComputeF32.String())
	fmt.Sscanf(md[mdLayers], "%d:%d", &in.Layers[0], &in.Layers[1])
	in.NumLayers, _ = strconv.Atoi(md[mdNumLayers])
	in.Bytes = f.DataStart() + f.DataSize()
	_, err = f.Tensor(tensorLogits)
	in.Logits = err == nil
	return in, nil
}
