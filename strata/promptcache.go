package strata

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"github.com/stratakernels/strata/op"
	"slices"
	"sync"
	"time"
)

// DefaultCheckpointEvery is the spacing of prompt-cache checkpoints within a prefill, in tokens,
// unless PromptCacheOptions.Every says otherwise (chosen by measurement: BENCHMARKS.md, "Prompt
// cache").
const DefaultCheckpointEvery = 1024

// DefaultPromptCacheBytes is the memory budget of a prompt cache unless
// PromptCacheOptions.Bytes says otherwise, and the disk budget unless DiskBytes does.
const DefaultPromptCacheBytes = 2 << 30

// PromptCacheOptions configure NewPromptCache.
type PromptCacheOptions struct {
	// Dir, when set, keeps every checkpoint on disk as well, as a session state file in a
	// subdirectory of Dir per model and stage (created if missing): processes that share Dir
	// share the checkpoints. "" keeps them in memory only.
	Dir string
	// Bytes is the most memory the checkpoints kept in memory may take (their states, token ids
	// and logits); the least recently used go first. 0: DefaultPromptCacheBytes.
	Bytes int64
	// DiskBytes is the most bytes the state files in Dir (of every model sharing it) may take;
	// the least recently used (by modification time, which a hit renews) go first. 0: Bytes.
	DiskBytes int64
	// Every is the checkpoint spacing in tokens: a prefill through the cache runs in steps that
	// end at every absolute position that is a multiple of Every (and are at most Every tokens
	// long) and keeps a checkpoint at each of those positions and at the end of the call, so
	// which prefixes can be reused depends on the prompts, not on the order of the calls.
	// 0: DefaultCheckpointEvery.
	Every int
}

// PromptCache keeps checkpoints of session states (all of them: a recurrent state cannot be cut
// back to a shorter prefix, so a prefix is reusable only where a checkpoint was taken) and
// resumes new prompts from the deepest checkpoint whose tokens are a prefix of them (Prefill).
// It is safe for concurrent use by many sessions of its model, from many goroutines; processes
// that share a directory share its checkpoints (state files written atomically, under
// content-addressed names) and its disk budget.
type PromptCache struct {
	m         *Model
	fp        string
	every     int
	bytes     int64
	diskBytes int64
	disk      *diskTier // nil without Dir

	mu   sync.Mutex
	mem  map[string]*checkpoint
	held int64  // bytes of mem
	tick uint64 // LRU clock
}

// checkpoint is one state kept in memory: the session state at pos made from ids, with the
// next-token logits after ids when the checkpoint ended a call (nil otherwise).
type checkpoint struct {
	key    string
	pos    int
	ids    []int32
	st     *snapshotState
	logits []float32
	bytes  int64
	used   uint64
}

// PromptCacheResult reports what one PromptCache.Prefill did.
type PromptCacheResult struct {
	// Reused of Tokens prompt tokens came from a checkpoint (or were the session's already, From
	// "session"); the rest were prefilled. From is "memory", "disk", "session" or "" (a miss).
	Reused, Tokens int
	From           string
	// Restore is the time taken to put the checkpoint into the session.
	Restore time.Duration
	// Checkpoints were taken (CheckpointBytes: their states, token ids and logits), in
	// CheckpointTime (the copies and the disk writes); Skipped of them were kept nowhere, being
	// larger than the budgets.
	Checkpoints     int
	CheckpointBytes int64
	CheckpointTime  time.Duration
	Skipped         int
	// Total is the call's whole time: the lookup, the restore, the prefill and the checkpoints.
	Total time.Duration
	// After the call: the checkpoints held in memory and their bytes; this model's state files
	// in the directory (0 without one), and the bytes of all the directory's state files (every
	// model's: what DiskBytes bounds).
	MemoryCheckpoints, DiskCheckpoints int
	MemoryBytes, DiskBytes             int64
}

// NewPromptCache makes a prompt cache for the model's sessions. Errors wrap ErrInvalidArgument
// (a nil model, a negative option, a budget smaller than one checkpoint: the message gives both
// sizes; a directory that cannot be created or written: the message names it and the error),
// ErrUnsupported (a pipeline stage: the cache runs whole models), ErrClosed or ErrCheckpoint
// (the model's files could not be read for its fingerprint).
func NewPromptCache(m *Model, opts PromptCacheOptions) (*PromptCache, error) {
	if m == nil {
		return nil, wrapf(ErrInvalidArgument, nil, "nil model")
	}
	if m.closed.Load() {
		return nil, wrapf(ErrClosed, nil, "model is closed")
	}
	if m.lo > 0 || m.hi < m.cfg.Layers {
		return nil, wrapf(ErrUnsupported, nil, "a prompt cache for a pipeline stage (layers %d:%d of %d): the cache runs whole models", m.lo, m.hi, m.cfg.Layers)
	}
	if opts.Bytes < 0 || opts.DiskBytes < 0 || opts.Every < 0 {
		return nil, wrapf(ErrInvalidArgument, nil, "PromptCacheOptions: Bytes %d, DiskBytes %d and Every %d must be >= 0 (0: the defaults)", opts.Bytes, opts.DiskBytes, opts.Every)
	}
	c := &PromptCache{m: m, every: opts.Every, bytes: opts.Bytes, diskBytes: opts.DiskBytes, mem: map[string]*checkpoint{}}
	if c.every == 0 {
		c.every = DefaultCheckpointEvery
	}
	if c.bytes == 0 {
		c.bytes = DefaultPromptCacheBytes
	}
	if c.diskBytes == 0 {
		c.diskBytes = c.bytes
	}
	// The smallest checkpoint holds one token (Prefill checks the budgets against the checkpoints
	// of its session, which hold up to min(Every, MaxContext) tokens).
	one := checkpointBytes(m, 1, true)
	if c.bytes < one {
		return nil, wrapf(ErrInvalidArgument, nil, "prompt cache budget of %d bytes is smaller than one checkpoint of 1 token (%d bytes)", c.bytes, one)
	}
	var err error
	if c.fp, err = m.Fingerprint(); err != nil {
		return nil, err
	}
	if opts.Dir != "" {
		if c.diskBytes < one {
			return nil, wrapf(ErrInvalidArgument, nil, "prompt cache disk budget of %d bytes is smaller than one checkpoint of 1 token (%d bytes)", c.diskBytes, one)
		}
		if c.disk, err = openDiskTier(opts.Dir, c.tierName(), c.diskBytes); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkpointBytes is the size of a checkpoint of pos tokens: the bytes of its states, token ids
// and (withLogits) logits, as held in memory and as the data section of its state file.
func checkpointBytes(m *Model, pos int, withLogits bool) int64 {
	per, fixed := m.StateBytes()
	n := fixed + int64(pos)*per
	if withLogits {
		n += 4 * int64(m.cfg.Vocab)
	}
	return n
}

// StateBytes is the size of a session's state: perToken bytes per token held (its per-token
// states and its id) and fixed bytes at any position (the fixed-size states). A session state
// file of pos tokens holds fixed + pos*perToken bytes after its header, and a snapshot as much.
func (m *Model) StateBytes() (perToken, fixed int64) {
	perToken = 4 // the token id
	for _, s := range sessionStates(m) {
		if s.Row > 0 {
			perToken += 4 * int64(s.Row)
		} else {
			fixed += 4 * int64(s.Len(0))
		}
	}
	return perToken, fixed
}

// tierName is the folder of the cache directory that holds this model's checkpoints: its
// fingerprint, its stage and, for a compute mode other than f32, the mode (a checkpoint
// continues with the bits of the mode that made it, so the modes keep apart).
func (c *PromptCache) tierName() string {
	name := fmt.Sprintf("%.16s-L%d-%d", c.fp, c.m.lo, c.m.hi)
	if c.m.mode != op.ComputeF32 {
		name += "-" + c.m.mode.String()
	}
	return name
}

// budgetDisk is the disk budget, or the memory budget without a directory.
func (c *PromptCache) budgetDisk() int64 {
	if c.disk == nil {
		return c.bytes
	}
	return c.diskBytes
}

// Every is the cache's checkpoint spacing in tokens.
func (c *PromptCache) Every() int { return c.every }

// prefixKey names the checkpoint of ids: the SHA-256 (hex, 128 bits) of the model's
// fingerprint, its stage and the ids. The checkpoint stores the ids themselves, which a lookup
// compares, so a collision cannot resume the wrong prompt.
func (c *PromptCache) prefixKey(ids []int32) string {
	h := sha256.New()
	fmt.Fprintf(h, "strata prompt cache v1\n%s\n%d:%d\n", c.fp, c.m.lo, c.m.hi)
	if c.m.mode != op.ComputeF32 {
		fmt.Fprintf(h, "compute %s\n", c.m.mode)
	}
	b := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Prefill runs prompt (the whole token sequence, from position 0) in session s of the cache's
// model, reusing the deepest checkpoint whose tokens are a prefix of prompt: the session's own
// state when its tokens are one, a checkpoint in memory, or a state file in the directory. The
// session's state is replaced by the checkpoint's and only the rest of the prompt is prefilled,
// in steps that end at every multiple of Every (absolute positions) and are at most Every
// tokens long (opts.Step, when smaller, bounds them too), taking a checkpoint at each multiple
// of Every and at the end of the call (with the last token's logits, so that the same prompt
// again needs no prefill). Resuming at position P gives the bits of Prefill calls split at P and
// at each multiple of Every after it: the checkpoint holds the state bitwise, and each step runs
// as such a call would.
//
// The logits are those of the prefilled tokens: Logits.Pos0 is the first (Reused) with
// opts.AllLogits, whose rows cover the tokens from Reused on (at least one token is prefilled
// then); without it the last token's, read from the checkpoint when the whole prompt was
// cached. opts.Hidden must be nil (the cache runs whole models). Validation happens before any
// work as in Session.Prefill (empty prompt, ids outside [0, vocab): ErrInvalidArgument; more
// tokens than MaxContext: ErrCapacity; a session of another model, or a budget smaller than one
// checkpoint of min(Every, MaxContext) tokens: ErrInvalidArgument naming the sizes). A failed
// or cancelled call leaves the session as it was before the call (its previous state is put
// back); checkpoints taken before the failure stay in the cache. A checkpoint that cannot be
// kept (larger than a budget) is skipped, and one that cannot be written or read on disk is
// logged and skipped: neither fails the call. A state file found corrupt is removed.
func (c *PromptCache) Prefill(ctx context.Context, s *Session, prompt []int32, opts PrefillOptions) (*Logits, *PromptCacheResult, error) {
	start := time.Now()
	if c == nil {
		return nil, nil, wrapf(ErrInvalidArgument, nil, "nil prompt cache")
	}
	if err := s.acquire(); err != nil {
		return nil, nil, err
	}
	defer s.release()
	m := c.m
	N := len(prompt)
	switch {
	case s.m != m:
		return nil, nil, wrapf(ErrInvalidArgument, nil, "the session belongs to another model than the prompt cache")
	case N == 0:
		return nil, nil, wrapf(ErrInvalidArgument, nil, "empty prompt")
	case opts.Hidden != nil:
		return nil, nil, wrapf(ErrInvalidArgument, nil, "PrefillOptions.Hidden given to a prompt cache prefill (the cache runs whole models)")
	case N > s.maxCtx:
		return nil, nil, wrapf(ErrCapacity, nil, "prompt of %d tokens exceeds the session's %d-token context", N, s.maxCtx)
	}
	// A checkpoint of this session holds up to min(Every, MaxContext) tokens before the next
	// grid point: a budget that cannot hold one would keep nothing useful.
	if n := min(c.every, s.maxCtx); checkpointBytes(m, n, true) > min(c.bytes, c.budgetDisk()) {
		return nil, nil, wrapf(ErrInvalidArgument, nil, "prompt cache budget of %d bytes (disk %d) is smaller than one checkpoint of %d tokens (min(Every %d, the session's MaxContext %d): %d bytes)",
			c.bytes, c.budgetDisk(), n, c.every, s.maxCtx, checkpointBytes(m, n, true))
	}
	for i, t := range prompt {
		if t < 0 || int(t) >= m.cfg.Vocab {
			return nil, nil, wrapf(ErrInvalidArgument, nil, "token %d at index %d is outside [0, %d)", t, i, m.cfg.Vocab)
		}
	}
	res := &PromptCacheResult{Tokens: N}
	// A checkpoint of the whole prompt is usable only with its logits and when only the last
	// token's logits are asked for; otherwise at least one token is prefilled.
	fullOK := !opts.AllLogits
	usable := func(pos int, hasLogits bool) bool { return pos < N || (pos == N && hasLogits && fullOK) }

	old := struct {
		st  *cache
		pos int
		ids []int32
	}{s.state, s.pos, s.ids}
	replaced := false
	install := func(st *cache, pos int, ids []int32) {
		s.state, s.pos, s.ids = st, pos, ids
		replaced = true
	}
	rollback := func() {
		if replaced {
			s.state.free(m.dev.be)
			s.state, s.pos, s.ids = old.st, old.pos, old.ids
		}
	}

	// The session's own state.
	best, from := 0, ""
	if s.pos > 0 && s.pos < N && slices.Equal(s.ids, prompt[:s.pos]) {
		best, from = s.pos, "session"
	}
	// Memory.
	c.mu.Lock()
	var hit *checkpoint
	var hitLogits []float32 // read under the lock: keep may add logits to a checkpoint
	for _, ck := range c.mem {
		if ck.pos > best && usable(ck.pos, ck.logits != nil) && slices.Equal(ck.ids, prompt[:ck.pos]) && (hit == nil || ck.pos > hit.pos) {
			hit = ck
		}
	}
	if hit != nil {
		c.tick++
		hit.used = c.tick
		best, from, hitLogits = hit.pos, "memory", hit.logits
	}
	c.mu.Unlock()
	var logits []float32 // of the whole prompt, from its checkpoint
	t0 := time.Now()
	// Disk: only what is deeper than the best so far.
	var loaded *loadedState
	if c.disk != nil {
		loaded = c.disk.lookup(m, s.maxCtx, prompt, best, usable, c.prefixKey)
	}
	switch {
	case loaded != nil:
		install(loaded.st, loaded.pos, loaded.ids)
		best, from, logits = loaded.pos, "disk", loaded.logits
	case hit != nil:
		st, err := newCache(m, s.maxCtx)
		if err != nil {
			return nil, nil, err
		}
		if err := st.load(hit.st); err != nil {
			st.free(m.dev.be)
			return nil, nil, err
		}
		install(st, hit.pos, append([]int32(nil), hit.ids...))
		logits = hitLogits
	case from == "":
		if s.pos > 0 { // nothing reusable: start from an empty state
			st, err := newCache(m, s.maxCtx)
			if err != nil {
				return nil, nil, err
			}
			st.initial = true // zeroed, as a cleared one
			install(st, 0, nil)
		}
	}
	res.Reused, res.From, res.Restore = best, from, time.Since(t0)

	var out *Logits
	if best == N {
		out = &Logits{Rows: 1, Vocab: m.cfg.Vocab, Pos0: N - 1, Data: append([]float32(nil), logits...)}
	} else {
		step := opts.Step
		if step == 0 {
			step = DefaultStep
		}
		if step < 0 {
			step = N - best
		}
		po := opts
		po.Step = min(step, c.every)
		hook := func(pos int, lg *Logits) {
			if pos%c.every != 0 && pos != N {
				return
			}
			var lgRow []float32
			if pos == N {
				lgRow = append([]float32(nil), lg.Row(lg.Rows-1)...)
			}
			c.keep(s, lgRow, res)
		}
		var err error
		if out, err = s.prefillLocked(ctx, prompt[best:], po, c.every, hook); err != nil {
			rollback()
			return nil, nil, err
		}
	}
	if replaced {
		old.st.free(m.dev.be)
	}
	if c.disk != nil {
		res.DiskCheckpoints, res.DiskBytes = c.disk.evict(m.dev)
	}
	c.mu.Lock()
	res.MemoryCheckpoints, res.MemoryBytes = len(c.mem), c.held
	c.mu.Unlock()
	res.Total = time.Since(start)
	return out, res, nil
}

// keep takes a checkpoint of the session (held by the caller) as it is now, with the logits
// after its last token when given: into memory, and into the directory when there is one.
func (c *PromptCache) keep(s *Session, logits []float32, res *PromptCacheResult) {
	t0 := time.Now()
	defer func() { res.CheckpointTime += time.Since(t0) }()
	pos := s.pos
	ids := append([]int32(nil), s.ids...)
	key := c.prefixKey(ids)
	size := checkpointBytes(c.m, pos, logits != nil)
	res.Checkpoints++
	res.CheckpointBytes += size
	kept := false
	var sn *snapshotState
	c.mu.Lock()
	if ck, ok := c.mem[key]; ok && slices.Equal(ck.ids, ids) {
		c.tick++
		ck.used = c.tick
		if ck.logits == nil && logits != nil && size <= c.bytes {
			// the same state, now with its logits
			c.held += size - ck.bytes
			ck.logits, ck.bytes = logits, size
			c.evictMemLocked()
		}
		sn, kept = ck.st, true
	}
	c.mu.Unlock()
	if !kept && size <= c.bytes {
		sn = s.state.snapshot(pos)
		c.mu.Lock()
		c.tick++
		c.mem[key] = &checkpoint{key: key, pos: pos, ids: ids, st: sn, logits: logits, bytes: size, used: c.tick}
		c.held += size
		c.evictMemLocked()
		c.mu.Unlock()
		kept = true
	}
	if c.disk != nil && size <= c.disk.bytes {
		src := s.state.liveSource(pos)
		if sn != nil {
			src = stateSource{dev: sn.data, ple: sn.pleCtx}
		}
		if err := c.disk.write(c.m, pos, key, ids, src, logits); err != nil {
			c.m.dev.logf(LogWarn, "prompt cache: checkpoint at %d tokens not written: %v", pos, err)
		} else {
			kept = true
		}
	}
	if !kept {
		res.Skipped++
	}
}

// evictMemLocked drops the least recently used checkpoints until the memory budget holds.
func (c *PromptCache) evictMemLocked() {
	for c.held > c.bytes && len(c.mem) > 0 {
		var lru *checkpoint
		for _, ck := range c.mem {
			if lru == nil || ck.used < lru.used {
				lru = ck
			}
		}
		delete(c.mem, lru.key)
		c.held -= lru.bytes
	}
}
