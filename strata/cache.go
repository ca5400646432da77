package strata

import (
	"fmt"

	"github.com/stratakernels/strata/family"
	"github.com/stratakernels/strata/op"
)

// state is one tensor of the session state on the device, as the plan's layer lists it
// (family.Layer.States). Per-token states (K, V, index keys) hold spec.Row elements per token,
// written only at rows >= the session position by a prefill, so a failed prefill leaves the
// valid rows untouched; fixed-size states are rewritten by every prefill and are backed up
// before it.
type state struct {
	spec  family.State
	t     op.Tensor
	row   int       // elements per token (per-token states), 0 for fixed-size ones
	saved []float32 // host backup of a fixed-size state while a prefill runs
}

// cache is the whole session state: one list of device states (walked by every operation below
// the same way on every backend) and the host states (the PLE layers' carried token ids).
type cache struct {
	states []*state
	at     map[stateKey]*state
	pleCtx map[int]*[2]int32
	// initial is set while the fixed-size states and the PLE contexts are known to hold their
	// starting values (zero; the contexts' InitialContext): by clear, and by NewSession and the
	// prompt cache's empty start on a fresh (zeroed) cache; unset by the first prefill. A failed
	// prefill from there clears the cache instead of restoring a backup, so the first prefill of
	// a session copies no state.
	initial bool
}

type stateKey struct {
	layer int
	role  string
}

// sessionStates lists the states of the model's loaded layers, in layer order.
func sessionStates(m *Model) []family.State {
	var out []family.State
	for _, ly := range m.layers {
		out = append(out, ly.States()...)
	}
	return out
}

// cacheBytes is the memory of a session cache of maxCtx tokens: every device state of the plan
// (per-token ones for maxCtx tokens), the fixed-size ones twice (the host backup a prefill makes
// unless the cache is in its initial state).
func cacheBytes(m *Model, maxCtx int) int64 {
	var n int64
	for _, s := range sessionStates(m) {
		switch {
		case s.Host:
		case s.Row > 0:
			n += 4 * int64(s.Len(maxCtx)) // F32 or I32 elements
		default:
			n += 2 * 4 * int64(s.Len(0))
		}
	}
	return n
}

// newCache allocates an empty (zeroed) cache for m on its backend. Errors wrap ErrOutOfMemory,
// before any allocation when the cache would not fit in the memory available.
func newCache(m *Model, maxCtx int) (*cache, error) {
	be := m.dev.be
	need := cacheBytes(m, maxCtx)
	if ok, avail, limit := memoryFor(need, 0); !ok {
		return nil, wrapf(ErrOutOfMemory, nil, "a session cache of %d tokens needs %.0f MiB, %.0f MiB are available (limit: %s; a smaller SessionOptions.MaxContext needs less)",
			maxCtx, mib(need), mib(avail), limit)
	}
	ch := &cache{at: map[stateKey]*state{}, pleCtx: map[int]*[2]int32{}}
	for _, s := range sessionStates(m) {
		if s.Host {
			// The PLE token context: the last 2 token ids, eos at the start.
			ctx := m.layerAt(s.Layer).hash.InitialContext()
			ch.pleCtx[s.Layer] = &ctx
			continue
		}
		t, err := be.NewTensor(s.DType, s.Len(maxCtx))
		if err != nil {
			ch.free(be)
			return nil, wrapf(ErrOutOfMemory, err, "session %s state of layer %d (%d elements)", s.Role, s.Layer, s.Len(maxCtx))
		}
		st := &state{spec: s, t: t, row: s.Row}
		ch.states = append(ch.states, st)
		ch.at[stateKey{s.Layer, s.Role}] = st
	}
	return ch, nil
}

// clear empties c for reuse as a new session's cache (Session.Reset, and NewSession taking a closed
// session's cache): the fixed-size states are zeroed and the PLE token contexts start again.
// Per-token states keep their old rows: a prefill writes rows pos.. before any op reads them, and
// nothing reads a row at or past the session position. Call it only while no Pass uses c.
func (c *cache) clear(m *Model) {
	for _, st := range c.states {
		if st.row == 0 {
			clear(st.t.F32())
			clear(st.t.I32())
		}
	}
	for i, x := range c.pleCtx {
		*x = m.layerAt(i).hash.InitialContext()
	}
	c.initial = true
}

// layerAt returns the loaded layer with checkpoint index i (nil when the stage does not hold it).
func (m *Model) layerAt(i int) *layer {
	if i < m.lo || i >= m.hi {
		return nil
	}
	return m.layers[i-m.lo]
}

// get returns the state of a layer with the role (family.Role*; nil when the layer has none).
func (c *cache) get(layer int, role string) op.Tensor {
	if st, ok := c.at[stateKey{layer, role}]; ok {
		return st.t
	}
	return nil
}

// free releases the device memory of every state.
func (c *cache) free(be op.Backend) {
	if c == nil {
		return
	}
	for _, st := range c.states {
		be.Free(st.t)
	}
	c.states = nil
	clear(c.at)
}

// backup copies every fixed-size state (and the PLE token contexts) into host memory before a
// prefill; restore puts them back after a failed one. Per-token states need neither: a prefill
// writes them only at rows past the session position.
func (c *cache) backup() map[int][2]int32 {
	for _, st := range c.states {
		if st.row == 0 {
			st.saved = append(st.saved[:0], st.t.F32()...)
		}
	}
	ctx := make(map[int][2]int32, len(c.pleCtx))
	for i, x := range c.pleCtx {
		ctx[i] = *x
	}
	return ctx
}

func (c *cache) restore(ctx map[int][2]int32) {
	for _, st := range c.states {
		if st.row == 0 {
			copy(st.t.F32(), st.saved)
		}
	}
	for i, x := range ctx {
		*c.pleCtx[i] = x
	}
}

// snapshotState is a host copy of a cache: per state its valid elements (the first pos rows of a
// per-token state, all of a fixed-size one), in the cache's state order.
type snapshotState struct {
	data   [][]float32
	pleCtx map[int][2]int32
}

// snapshot copies the first rows tokens of the cache into host memory.
func (c *cache) snapshot(rows int) *snapshotState {
	sn := &snapshotState{pleCtx: map[int][2]int32{}}
	for _, st := range c.states {
		n := st.t.Len()
		if st.row > 0 {
			n = rows * st.row
		}
		sn.data = append(sn.data, append([]float32(nil), st.t.F32()[:n]...))
	}
	for i, x := range c.pleCtx {
		sn.pleCtx[i] = *x
	}
	return sn
}

// load copies a snapshot of the same model into the cache (whose capacity the caller checked).
func (c *cache) load(sn *snapshotState) error {
	if len(sn.data) != len(c.states) {
		return fmt.Errorf("%w: snapshot of %d states for a cache of %d", ErrInvalidArgument, len(sn.data), len(c.states))
	}
	for i, st := range c.states {
		copy(st.t.F32(), sn.data[i])
	}
	for i, x := range sn.pleCtx {
		*c.pleCtx[i] = x
	}
	return nil
}

// equal reports whether two snapshots hold bitwise identical state (NaN equal to NaN).
func (sn *snapshotState) equal(o *snapshotState) bool {
	if len(sn.data) != len(o.data) || len(sn.pleCtx) != len(o.pleCtx) {
		return false
	}
	for i, a := range sn.data {
		b := o.data[i]
		if len(a) != len(b) {
			return false
		}
		for j := range a {
			if a[j] != b[j] && !(a[j] != a[j] && b[j] != b[j]) {
				return false
			}
		}
	}
	for i, x := range sn.pleCtx {
		if o.pleCtx[i] != x {
			return false
		}
	}
	return true
}
