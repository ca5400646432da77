package metal

import (
	"fmt"
	"time"

	"github.com/stratakernels/strata/op"
)

// CommandBufferBudget bounds the work of one command buffer. macOS stops a command buffer that
// keeps the GPU busy too long while it drives a display (the watchdog reports "Impacting
// Interactivity" or a timeout), so a Pass (a whole prefill chunk) is split into command buffers
// of at most Dispatches dispatches and at most Threads threads launched (threadgroups x threads
// per threadgroup, summed over the dispatches); a single dispatch over the budget gets a command
// buffer of its own (a dispatch is never split). Splitting changes no result: the command
// buffers run in order on one queue.
//
// The bound is on encoded work, not time: how long a buffer runs depends on the GPU and the
// kernels (a GEMM thread loops over K). DefaultCommandBufferBudget keeps a buffer to about two
// decoder layers of a prefill chunk (20-30 dispatches a layer) and to 2^24 threads (a
// T = 2048, N = 8192 GEMM launches 2^21 at 32x32 tiles of 128 threads), which on Apple
// silicon is well under the second-scale limits reported for the watchdog; the self-test's
// report gives each command buffer's GPU time on the machine it ran on, which is where a budget
// too large shows.
type CommandBufferBudget struct {
	Dispatches int
	Threads    int64
}

// DefaultCommandBufferBudget is the budget of a new Backend.
var DefaultCommandBufferBudget = CommandBufferBudget{Dispatches: 64, Threads: 1 << 24}

// SetCommandBufferBudget sets the budget of the Backend's command buffers (Commit splits each
// Pass by it). Errors wrap op.ErrInvalidArgument for a non-positive field.
func (b *Backend) SetCommandBufferBudget(budget CommandBufferBudget) error {
	if budget.Dispatches <= 0 || budget.Threads <= 0 {
		return fmt.Errorf("metal: %w: command buffer budget %+v: both fields must be positive", op.ErrInvalidArgument, budget)
	}
	b.mu.Lock()
	b.budget = budget
	b.mu.Unlock()
	return nil
}

// split cuts cmds into consecutive runs within the budget.
func (b *Backend) split(cmds []dispatchCmd) [][]dispatchCmd {
	b.mu.Lock()
	budget := b.budget
	b.mu.Unlock()
	var parts [][]dispatchCmd
	start, n, threads := 0, 0, int64(0)
	for i := range cmds {
		c := &cmds[i]
		t := int64(c.groups[0]*c.groups[1]*c.groups[2]) * int64(c.threads[0]*c.threads[1]*c.threads[2])
		if n > 0 && (n+1 > budget.Dispatches || threads+t > budget.Threads) {
			parts = append(parts, cmds[start:i])
			start, n, threads = i, 0, 0
		}
		n++
		threads += t
	}
	return append(parts, cmds[start:])
}

// recordCommandBuffers keeps the GPU time of each command buffer of a Pass (0 where the device
// reports none).
func (b *Backend) recordCommandBuffers(gpu []time.Duration) {
	b.mu.Lock()
	b.cbTimes = append(b.cbTimes, gpu...)
	b.mu.Unlock()
}

// CommandBufferTimes returns the GPU time of every command buffer committed so far, in commit
// order (mtl.GPUTimer; 0 for a device that reports none, such as the emulator); ResetVariants
// clears it.
func (b *Backend) CommandBufferTimes() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.cbTimes...)
}
