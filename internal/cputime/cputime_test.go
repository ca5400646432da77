package cputime

import (
	"runtime"
	"testing"
	"time"
)

// spin keeps the calling thread busy for about d of wall time.
func spin(d time.Duration) (x float64) {
	for t0 := time.Now(); time.Since(t0) < d; {
		for i := range 1000 {
			x += float64(i) * 1e-9
		}
	}
	return x
}

// TestProcess: the process's user time grows by about the wall time a thread spins (at least
// half of it: the machine may be shared), and neither part goes back.
func TestProcess(t *testing.T) {
	u0, s0, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("getrusage failed")
		}
		t.Skip("no process CPU time on", runtime.GOOS)
	}
	_ = spin(100 * time.Millisecond)
	u1, s1, _ := Process()
	if u1 < u0 || s1 < s0 {
		t.Fatalf("CPU time went back: user %v -> %v, system %v -> %v", u0, u1, s0, s1)
	}
	if d := u1 - u0 + s1 - s0; d < 50*time.Millisecond || d > 10*time.Second {
		t.Errorf("100 ms of spinning took %v of process CPU time", d)
	}
}

// TestThread: the thread's CPU time grows by about the wall time it spins, and not by the time
// it sleeps.
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := Thread()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("CLOCK_THREAD_CPUTIME_ID failed")
		}
		t.Skip("no thread CPU time on", runtime.GOOS)
	}
	_ = spin(100 * time.Millisecond)
	c1, _ := Thread()
	time.Sleep(100 * time.Millisecond)
	c2, _ := Thread()
	if d := c1 - c0; d < 50*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("100 ms of spinning took %v of the thread's CPU time", d)
	}
	if d := c2 - c1; d > 20*time.Millisecond {
		t.Errorf("100 ms of sleep took %v of the thread's CPU time", d)
	}
}
