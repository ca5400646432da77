package strata

import (
	"runtime"
	"sync"
	"weak"

	"github.com/stratakernels/strata/metal"
)

// residentBackend is a backend that keeps the session cache in device memory and runs a whole
// prefill chunk itself (metal: one command buffer per chunk). Sessions of such a backend hold
// cache slices that alias the device tensors (shared storage), so Snapshot, Equal and the tests
// read the device state without copies.
type residentBackend interface {
	backend
	// newCache allocates a zeroed session cache in device memory.
	newCache(m *Model, maxCtx int) (*cache, error)
	// prefill runs tokens at s.pos and leaves the session unchanged when it fails.
	prefill(s *Session, run func() (*Logits, error)) (*Logits, error)
	// releaseCache frees a cache's device memory (the cache must not be used afterwards).
	releaseCache(c *cache)
}

// modelWeights holds the device-resident weights of every model loaded on a metal backend (a
// model belongs to one device, so one table serves them all).
var modelWeights metalModels

// metalModels keeps each model's device-resident weights, uploaded on first use and released
// by Model.Close (or when the model is garbage collected without being closed).
type metalModels struct {
	mu sync.Mutex
	w  map[weak.Pointer[Model]]*metal.Weights
}

func (mm *metalModels) weights(b *metal.Backend, m *Model) *metal.Weights {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if mm.w == nil {
		mm.w = map[weak.Pointer[Model]]*metal.Weights{}
	}
	k := weak.Make(m)
	if w, ok := mm.w[k]; ok {
		return w
	}
	w := b.NewWeights()
	mm.w[k] = w
	type entry struct {
		mm *metalModels
		k  weak.Pointer[Model]
	}
	runtime.AddCleanup(m, func(e entry) {
		e.mm.mu.Lock()
		if w, ok := e.mm.w[e.k]; ok {
			w.Release()
			delete(e.mm.w, e.k)
		}
		e.mm.mu.Unlock()
	}, entry{mm, k})
	return w
}

// release frees m's device-resident weights now (Model.Close); later prefills of a closed model
// are refused before they could upload again.
func (mm *metalModels) release(m *Model) {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	k := weak.Make(m)
	if w, ok := mm.w[k]; ok {
		w.Release()
		delete(mm.w, k)
	}
}

// metalCache is the device side of a session cache: the tensor behind each cache slice, the
// backup of the fixed-size states (written inside each prefill's command buffer before the
// layers run, copied back by the host when the command buffer fails) and the prefill's scratch.
type metalCache struct {
	t      map[*float32]*metal.Tensor
	fixed  [][2]*metal.Tensor // (state, backup) of every GDN conv / recurrent and PLE conv state
	arena  *metal.Arena
	tenant []*metal.Tensor
}

// tensor returns the device tensor aliased by the cache slice x.
func (mc *metalCache) tensor(x []float32) *metal.Tensor { return mc.t[&x[0]] }

func (mb metalBackend) newCache(m *Model, maxCtx int) (*cache, error) {
	mc := &metalCache{t: map[*float32]*metal.Tensor{}, arena: mb.b.NewArena()}
	var ferr error
	alloc := func(n int) []float32 {
		if ferr != nil || n == 0 {
			return make([]float32, n)
		}
		t, err := mb.b.NewTensor(n)
		if err != nil {
			ferr = err
			return make([]float32, n)
		}
		mc.tenant = append(mc.tenant, t)
		x := t.F32()
		mc.t[&x[0]] = t
		return x
	}
	c := newCacheAlloc(m, maxCtx, alloc)
	for _, mp := range []map[int][]float32{c.conv, c.rec, c.pleConv} {
		for _, x := range mp {
			if ferr != nil {
				break
			}
			if len(x) == 0 {
				continue
			}
			bk, err := mb.b.NewTensor(len(x))
			if err != nil {
				ferr = err
				break
			}
			mc.tenant = append(mc.tenant, bk)
			mc.fixed = append(mc.fixed, [2]*metal.Tensor{mc.tensor(x), bk})
		}
	}
	c.dev = mc
	if ferr != nil {
		mb.releaseCache(c)
		return nil, wrapf(ErrBackend, ferr, "session cache on the device")
	}
	return c, nil
}

func (mb metalBackend) releaseCache(c *cache) {
	if c == nil || c.dev == nil {
		return
	}
	mc := c.dev.(*metalCache)
	for _, t := range mc.tenant {
		t.Release()
	}
	mc.tenant = nil
	mc.arena.Release()
	c.dev = nil
}

// copyCache copies src's first rows tokens and its fixed-size states into dst (same model).
func copyCache(dst, src *cache, m *Model, rows int) {
	cf := m.cfg
	kv := cf.Hkv * cf.HeadDim
	for i, b := range src.k {
		copy(dst.k[i], b[:rows*kv])
		copy(dst.v[i], src.v[i][:rows*kv])
	}
	for i, b := range src.idxK {
		copy(dst.idxK[i], b[:rows*cf.IdxDim])
	}
	for _, mp := range []struct{ d, s map[int][]float32 }{{dst.conv, src.conv}, {dst.rec, src.rec}, {dst.pleConv, src.pleConv}} {
		for i, b := range mp.s {
			copy(mp.d[i], b)
		}
	}
	for i, b := range src.pleCtx {
		*dst.pleCtx[i] = *b
	}
}

// prefill runs one chunk: run encodes it into one command buffer that first backs up the
// fixed-size states, and commits it. When the command buffer fails the host copies the backups
// back; when encoding fails or is cancelled nothing ran. The PLE token contexts (host integers)
// are saved and restored around the call.
func (mb metalBackend) prefill(s *Session, run func() (*Logits, error)) (*Logits, error) {
	ctxs := map[int][2]int32{}
	for i, x := range s.state.pleCtx {
		ctxs[i] = *x
	}
	logits, err := run()
	if err != nil {
		for i, x := range ctxs {
			*s.state.pleCtx[i] = x
		}
		return nil, err
	}
	return logits, nil
}
