package emu

import (
	"errors"
	"strings"
	"testing"

	"github.com/stratakernels/strata/metal/mtl"
)

const liveKernel = `#include <metal_stdlib>
using namespace metal;
kernel void fill(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    y[i] = float(i);
}
`

// TestLiveObjects: the device counts each library, pipeline, buffer and command buffer from its
// creation to its Release (a second Release changes nothing); a pipeline keeps running after its
// library's Release (the library unloads with its last pipeline); a released pipeline is refused
// by an encoder, a released library builds no pipeline, and a released, uncommitted command
// buffer runs nothing; Options.MaxThreadsPerThreadgroup caps the pipeline's limit and its
// dispatches.
func TestLiveObjects(t *testing.T) {
	dev := openDev(t, Options{Threads: 1, MaxThreadsPerThreadgroup: 96})
	want := func(what string, l mtl.Live) {
		t.Helper()
		if got := dev.Live(); got != l {
			t.Fatalf("%s: live %v, want %v", what, got, l)
		}
	}
	lib, err := dev.NewLibrary("live.metal", liveKernel, testCompile)
	if err != nil {
		t.Fatal(err)
	}
	p := pipe(t, lib, "fill")
	if n := p.MaxTotalThreadsPerThreadgroup(); n != 96 {
		t.Errorf("MaxTotalThreadsPerThreadgroup %d, want the cap 96", n)
	}
	buf, err := dev.NewBuffer(4 * 128)
	if err != nil {
		t.Fatal(err)
	}
	want("created", mtl.Live{Libraries: 1, Pipelines: 1, Buffers: 1})
	lib.Release()
	lib.Release()
	want("library released", mtl.Live{Pipelines: 1, Buffers: 1})
	if _, err := lib.Pipeline("fill", nil); !errors.Is(err, mtl.ErrCompile) {
		t.Errorf("Pipeline of a released library: %v, want mtl.ErrCompile", err)
	}
	if err := dispatch(t, dev, p, []arg{{buf: buf}}, nil, [3]int{2, 1, 1}, [3]int{64, 1, 1}); err != nil {
		t.Fatalf("pipeline after its library's Release: %v", err)
	}
	if y := buf.Contents(); y[4*127] == 0 && y[4*127+3] == 0 {
		t.Error("the dispatch wrote nothing")
	}
	if err := dispatch(t, dev, p, []arg{{buf: buf}}, nil, [3]int{1, 1, 1}, [3]int{128, 1, 1}); err == nil || !strings.Contains(err.Error(), "pipeline allows 96") {
		t.Errorf("128 threads on a pipeline capped at 96: %v", err)
	}
	cb, err := dev.NewCommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	want("command buffer", mtl.Live{Pipelines: 1, Buffers: 1, CommandBuffers: 1})
	clear(buf.Contents())
	enc, err := cb.ComputeEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetPipeline(p)
	enc.SetBuffer(buf, 0, 0)
	enc.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{32, 1, 1})
	enc.EndEncoding()
	cb.Release()
	cb.Commit()
	if err := cb.Wait(); !errors.Is(err, mtl.ErrExecution) {
		t.Errorf("Commit after Release: %v, want mtl.ErrExecution", err)
	}
	if buf.Contents()[4*31] != 0 {
		t.Error("a released command buffer ran")
	}
	p.Release()
	want("pipeline released", mtl.Live{Buffers: 1})
	cb2, _ := dev.NewCommandBuffer()
	enc2, _ := cb2.ComputeEncoder()
	enc2.SetPipeline(p)
	enc2.EndEncoding()
	cb2.Commit()
	if err := cb2.Wait(); err == nil || !strings.Contains(err.Error(), "was released") {
		t.Errorf("a released pipeline: %v", err)
	}
	cb2.Release()
	buf.Release()
	want("all released", mtl.Live{})
}
