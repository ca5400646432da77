package strata

import (
	"fmt"

	"github.com/stratakernels/strata/op"
)

// stateKind names one part of the session state.
type stateKind int

const (
	stateK       stateKind = iota // attention K after k_norm and RoPE [maxCtx, Hkv, HeadDim]
	stateV                        // attention V [maxCtx, Hkv, HeadDim]
	stateIdxK                     // QSA indexer raw keys [maxCtx, IdxDim]
	stateConv                     // GDN short-conv state [ConvK-1, C]
	stateRec                      // GDN recurrent state [Hv, dk, dv] fp32
	statePLEConv                  // PLE short-conv state [9, S*D]
)

func (k stateKind) String() string {
	return [...]string{"k cache", "v cache", "index keys", "conv state", "recurrent state", "ple conv state"}[k]
}

// state is one tensor of the session state on the device. Per-token states (K, V, index keys)
// hold row elements per token, written only at rows >= the session position by a prefill, so a
// failed prefill leaves the valid rows untouched; fixed-size states (row == 0) are rewritten by
// every prefill and are backed up before it.
type state struct {
	kind  stateKind
	layer int
	t     op.Tensor
	row   int       // elements per token (per-token states), 0 for fixed-size ones
	saved []float32 // host backup of a fixed-size state while a prefill runs
}

// cache is the whole session state: one list of states (walked by every operation below the
// same way on every backend) and the PLE layers' carried token ids, which are host integers.
type cache struct {
	states []*state
	at     map[[2]int]*state // (layer, kind) -> state
	pleCtx map[int]*[2]int32
}

// cacheBytes is the memory of a session cache of maxCtx tokens: K and V (and the indexer's raw
// keys) per attention layer, the conv and recurrent states per GDN layer, the conv state per PLE
// layer, each once more for the prefill's host backup of the fixed-size states.
func cacheBytes(m *Model, maxCtx int) int64 {
	c := m.cfg
	C := int64(2*c.Hk*c.Dk + c.Hv*c.Dv)
	var n int64
	for _, ly := range m.layers {
		if ly.gdn != nil {
			n += 2 * (int64(c.ConvK-1)*C + int64(c.Hv*c.Dk*c.Dv))
		} else {
			n += 2 * int64(maxCtx) * int64(c.Hkv*c.HeadDim)
			if ly.attn.idx != nil {
				n += int64(maxCtx) * int64(c.IdxDim)
			}
		}
		if ly.ple != nil {
			n += 2 * int64(ly.ple.w.ConvStateLen())
		}
	}
	return 4 * n
}

// newCache allocates an empty (zeroed) cache for m on its backend. Errors wrap ErrOutOfMemory,
// before any allocation when the cache would not fit in the memory available.
func newCache(m *Model, maxCtx int) (*cache, error) {
	c := m.cfg
	be := m.dev.be
	need := cacheBytes(m, maxCtx)
	if ok, avail := memoryFor(need, 0); !ok {
		return nil, wrapf(ErrOutOfMemory, nil, "a session cache of %d tokens needs %.0f MiB, %.0f MiB are available (a smaller SessionOptions.MaxContext needs less)",
			maxCtx, mib(need), mib(avail))
	}
	ch := &cache{at: map[[2]int]*state{}, pleCtx: map[int]*[2]int32{}}
	add := func(layer int, kind stateKind, n, row int) error {
		t, err := be.NewTensor(op.F32, n)
		if err != nil {
			return wrapf(ErrOutOfMemory, err, "session %s of layer %d (%d floats)", kind, layer, n)
		}
		st := &state{kind: kind, layer: layer, t: t, row: row}
		ch.states = append(ch.states, st)
		ch.at[[2]int{layer, int(kind)}] = st
		return nil
	}
	C := 2*c.Hk*c.Dk + c.Hv*c.Dv
	kv := c.Hkv * c.HeadDim
	for _, ly := range m.layers {
		i := ly.index
		var err error
		if ly.gdn != nil {
			err = firstErr(add(i, stateConv, (c.ConvK-1)*C, 0), add(i, stateRec, c.Hv*c.Dk*c.Dv, 0))
		} else {
			err = firstErr(add(i, stateK, maxCtx*kv, kv), add(i, stateV, maxCtx*kv, kv))
			if err == nil && ly.attn.idx != nil {
				err = add(i, stateIdxK, maxCtx*c.IdxDim, c.IdxDim)
			}
		}
		if err == nil && ly.ple != nil {
			err = add(i, statePLEConv, ly.ple.w.ConvStateLen(), 0)
			ctx := ly.ple.hash.InitialContext()
			ch.pleCtx[i] = &ctx
		}
		if err != nil {
			ch.free(be)
			return nil, err
		}
	}
	return ch, nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// get returns the state of a layer (nil when the layer has none of that kind).
func (c *cache) get(layer int, kind stateKind) op.Tensor {
	if st, ok := c.at[[2]int{layer, int(kind)}]; ok {
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
