package strata

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stratakernels/strata/metal"
	"github.com/stratakernels/strata/metal/mtl"
)

// countingDevice wraps a device and counts command buffers, commits and buffer bytes; with
// failWait set, a command buffer runs but reports an execution error (a GPU fault after the
// work wrote its outputs).
type countingDevice struct {
	mtl.Device
	cbs, commits, bytes atomic.Int64
	failWait            atomic.Bool
}

func (d *countingDevice) NewBuffer(n int) (mtl.Buffer, error) {
	d.bytes.Add(int64(n))
	return d.Device.NewBuffer(n)
}

func (d *countingDevice) NewCommandBuffer() (mtl.CommandBuffer, error) {
	d.cbs.Add(1)
	cb, err := d.Device.NewCommandBuffer()
	if err != nil {
		return nil, err
	}
	return &countingCB{CommandBuffer: cb, d: d}, nil
}

type countingCB struct {
	mtl.CommandBuffer
	d *countingDevice
}

func (c *countingCB) Commit() {
	c.d.commits.Add(1)
	c.CommandBuffer.Commit()
}

func (c *countingCB) Wait() error {
	err := c.CommandBuffer.Wait()
	if err == nil && c.d.failWait.Load() {
		return fmt.Errorf("%w: injected fault", mtl.ErrExecution)
	}
	return err
}

func loadCounting(t *testing.T, dir string) (*countingDevice, *Model) {
	t.Helper()
	cd := &countingDevice{Device: emuDevice(t)}
	dev, err := Open(Options{Backend: "metal", MetalDevice: cd})
	if err != nil {
		t.Fatal(err)
	}
	// One command buffer a chunk is the contract within the budget: lift it so that the counts
	// below do not depend on how many dispatches a tiny model's chunk takes (the split itself is
	// tested bitwise in package metal).
	if err := dev.be.(*metal.Backend).SetCommandBufferBudget(metal.CommandBufferBudget{Dispatches: 1 << 30, Threads: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(dev, testdata(dir), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return cd, m
}

// TestMetalResidentPrefill: on the metal backend a prefill chunk within the command buffer
// budget is one command buffer committed once; the weights are uploaded by the first prefill of a model only (a second session's first
// prefill allocates exactly the weight bytes less, and a later prefill of the same size on the
// same session allocates nothing); a command buffer that fails after running leaves the session
// bitwise unchanged (the fixed-size states come back from their host backups), and the
// session then continues as if the failed call never happened.
func TestMetalResidentPrefill(t *testing.T) {
	for _, tm := range tinyModels {
		t.Run(tm.name, func(t *testing.T) {
			cd, m := loadCounting(t, tm.dir)
			ids := openGoldens(t, tm.goldens).i32("a.input_ids")
			ctx := context.Background()
			prefill := func(s *Session, tok []int32) (cbs, commits, bytes int64, l *Logits) {
				t.Helper()
				c0, k0, b0 := cd.cbs.Load(), cd.commits.Load(), cd.bytes.Load()
				l, err := s.Prefill(ctx, tok, PrefillOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return cd.cbs.Load() - c0, cd.commits.Load() - k0, cd.bytes.Load() - b0, l
			}
			s1, _ := m.NewSession(SessionOptions{MaxContext: 64})
			cb, cm, b1, _ := prefill(s1, ids[:12])
			if cb != 1 || cm != 1 {
				t.Errorf("first prefill: %d command buffers, %d commits; want 1 and 1", cb, cm)
			}
			w := m.weights.Bytes()
			if w <= 0 {
				t.Fatalf("no weight bytes uploaded")
			}
			s2, _ := m.NewSession(SessionOptions{MaxContext: 64})
			cb, cm, b2, _ := prefill(s2, ids[:12])
			if cb != 1 || cm != 1 {
				t.Errorf("second session: %d command buffers, %d commits; want 1 and 1", cb, cm)
			}
			if b1-b2 != w {
				t.Errorf("first prefill allocated %d bytes, a second session's %d: difference %d, want the %d weight bytes", b1, b2, b1-b2, w)
			}
			if w2 := m.weights.Bytes(); w2 != w {
				t.Errorf("weights grew from %d to %d bytes on a second session", w, w2)
			}
			// Same size again at a later position: the arena and weights are reused (no new
			// buffers), still one command buffer.
			cb, cm, b3, _ := prefill(s2, ids[12:24])
			if cb != 1 || cm != 1 || b3 != 0 {
				t.Errorf("third prefill: %d command buffers, %d commits, %d new bytes; want 1, 1, 0", cb, cm, b3)
			}

			// A fault reported after the command buffer ran.
			before, _ := s1.Snapshot()
			cd.failWait.Store(true)
			_, err := s1.Prefill(ctx, ids[12:24], PrefillOptions{})
			cd.failWait.Store(false)
			if !errors.Is(err, ErrBackend) || !errors.Is(err, mtl.ErrExecution) {
				t.Fatalf("faulted prefill: %v, want ErrBackend wrapping mtl.ErrExecution", err)
			}
			after, _ := s1.Snapshot()
			if s1.Position() != 12 || !before.Equal(after) {
				t.Fatalf("session changed by a faulted prefill (position %d)", s1.Position())
			}
			_, _, _, got := prefill(s1, ids[24:36])
			ref, _ := m.NewSession(SessionOptions{MaxContext: 64})
			prefill(ref, ids[:12])
			_, _, _, want := prefill(ref, ids[24:36])
			for i := range want.Data {
				if got.Data[i] != want.Data[i] {
					t.Fatalf("logit %d after a faulted prefill %v != %v (want bitwise equal)", i, got.Data[i], want.Data[i])
				}
			}

			// Restore copies into new device buffers and reproduces the snapshot bitwise.
			if err := s1.Restore(before); err != nil {
				t.Fatal(err)
			}
			again, _ := s1.Snapshot()
			if !before.Equal(again) {
				t.Fatal("restored session differs from its snapshot")
			}
		})
	}
}
