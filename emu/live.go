package emu

import (
	"sync/atomic"

	"github.com/stratakernels/strata/metal/mtl"
)

// Live counts the objects an emulated device handed out and the caller has not released yet
// (mtl.Live).
type Live = mtl.Live

// liveCounters are the atomic counts behind Live, one set per device and one for the process.
type liveCounters struct {
	libraries, pipelines, buffers, commandBuffers atomic.Int64
}

func (c *liveCounters) load() Live {
	return Live{Libraries: c.libraries.Load(), Pipelines: c.pipelines.Load(), Buffers: c.buffers.Load(), CommandBuffers: c.commandBuffers.Load()}
}

// processLive counts the live objects of every emulated device of the process.
var processLive liveCounters

// LiveObjects is the live objects of every emulated device of the process (a host that opens its
// devices itself, as strata.Open does for backend "emu", checks its releases with it).
func LiveObjects() Live { return processLive.load() }

// Live implements mtl.LiveCounter: the live objects of this device.
func (d *Device) Live() Live { return d.live.load() }

// count adds delta to the counter pick selects, on the device and for the process.
func (d *Device) count(pick func(*liveCounters) *atomic.Int64, delta int64) {
	pick(&d.live).Add(delta)
	pick(&processLive).Add(delta)
}

func libraries(c *liveCounters) *atomic.Int64      { return &c.libraries }
func pipelines(c *liveCounters) *atomic.Int64      { return &c.pipelines }
func buffers(c *liveCounters) *atomic.Int64        { return &c.buffers }
func commandBuffers(c *liveCounters) *atomic.Int64 { return &c.commandBuffers }
