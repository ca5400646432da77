package cputime

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// spinUntil keeps the calling thread busy until clock has advanced by d from its first reading
// (or 20 s of wall time have passed, on a machine too busy to give it that), and returns the
// wall time it took.
func spinUntil(t *testing.T, clock func() time.Duration, d time.Duration) time.Duration {
	t.Helper()
	t0, c0 := time.Now(), clock()
	x := 0.0
	for clock()-c0 < d {
		for i := range 200000 { // about 0.1 ms between readings: the clocks are system calls
			x += float64(i) * 1e-9
		}
		if time.Since(t0) > 20*time.Second {
			t.Fatalf("the clock advanced %v in 20 s of spinning (%g)", clock()-c0, x)
		}
	}
	return time.Since(t0)
}

func process(t *testing.T) (user, sys time.Duration) {
	u, s, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("getrusage failed")
		}
		t.Skip("no process CPU time on", runtime.GOOS)
	}
	return u, s
}

func thread(t *testing.T) time.Duration {
	c, ok := Thread()
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("CLOCK_THREAD_CPUTIME_ID failed")
		}
		t.Skip("no thread CPU time on", runtime.GOOS)
	}
	return c
}

// TestThread: a thread's CPU time does not run ahead of the wall clock while it spins, and
// hardly moves while it sleeps.
func TestThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clock := func() time.Duration { return thread(t) }
	c0 := clock()
	wall := spinUntil(t, clock, 50*time.Millisecond)
	c1 := clock()
	if c1-c0 > wall+time.Millisecond {
		t.Errorf("the thread's CPU time advanced %v in %v of wall time", c1-c0, wall)
	}
	time.Sleep(50 * time.Millisecond)
	if d := clock() - c1; d > 10*time.Millisecond {
		t.Errorf("50 ms of sleep took %v of the thread's CPU time", d)
	}
}

// TestProcess: the process's CPU time counts every thread: two threads spinning 50 ms of their
// own CPU time each add at least their sum; the spinning is user time, more of it than system
// time; neither part goes back.
func TestProcess(t *testing.T) {
	u0, s0 := process(t)
	var mu sync.Mutex
	var threads time.Duration
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			clock := func() time.Duration { return thread(t) }
			c0 := clock()
			spinUntil(t, clock, 50*time.Millisecond)
			mu.Lock()
			threads += clock() - c0
			mu.Unlock()
		}()
	}
	wg.Wait()
	u1, s1 := process(t)
	if u1 < u0 || s1 < s0 {
		t.Fatalf("CPU time went back: user %v -> %v, system %v -> %v", u0, u1, s0, s1)
	}
	// getrusage splits the scheduler's exact total by ticks, in microseconds: a little slack.
	if d := u1 - u0 + s1 - s0; d+2*time.Millisecond < threads {
		t.Errorf("two threads used %v of CPU time, the process's grew by %v", threads, d)
	}
	if u1-u0 <= s1-s0 {
		t.Errorf("spinning took user %v, system %v", u1-u0, s1-s0)
	}
}
