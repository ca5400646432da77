package optest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stratakernels/strata/op"
)

// The timing mode: the op cases run on any backend outside a test and timed (as ggml's
// test-backend-ops times its case table in perf mode). A Case is an entry of an op's table
// (Cases: the very entries the runners test) or of the benchmark list at the real models'
// widths (BenchCases), built by the same code; Time runs one.

// Case is one op case as Time runs it: its full name ("MatMul/T65_N97_K130_BF16", the name of
// its subtest), its nominal work and how its inputs are set up.
type Case struct {
	Name string
	// Flops is the floating-point operations of one run (2 per multiply-add, the count each
	// case's doc gives; 0 for the data-movement ops), Bytes the memory the op must at least
	// read and write where the case counts it (0 otherwise).
	Flops, Bytes float64
	build        func(e *env) (func(op.Pass) error, func(*testing.T, *suite))
	weights      op.WeightOptions // the case's weight store
}

// Result is what Time measured of a case.
type Result struct {
	Name string
	Reps int
	// Median and Min are the wall time of one Pass (Begin, the case's ops, Commit) over the
	// timed repetitions; Device is the median device time the Passes reported (op.Timing.Total:
	// the command buffer's GPU time on Metal, the ops' time on the CPU).
	Median, Min, Device time.Duration
	Flops, Bytes        float64
}

// GFLOPS is Flops per Median in units of 1e9 per second (0 for a case without a count).
func (r Result) GFLOPS() float64 { return r.Flops / r.Median.Seconds() / 1e9 }

// GBPS is Bytes per Median in units of 1e9 per second (0 for a case without a count).
func (r Result) GBPS() float64 { return r.Bytes / r.Median.Seconds() / 1e9 }

// Time sets c up on be (inputs generated and copied into tensors of be, untimed), runs its ops
// in one Pass once to warm up (weights uploaded, kernels compiled), then reps more times, one
// Pass each, and reports the median and fastest wall time of those reps. In-place ops
// (GRApplyMoEC's streams, GDNScan's state, QSAPrep's caches) start each run from the last one's
// results, which changes their values, not their work; outputs are not checked (the tests do
// that). Errors wrap the setup's failure or an op's error (a shape a backend does not take:
// op.ErrUnsupported), naming the case; reps must be at least 1.
func Time(be op.Backend, c Case, reps int) (res Result, err error) {
	if reps < 1 {
		return Result{}, fmt.Errorf("optest.Time %s: %w: %d repetitions", c.Name, op.ErrInvalidArgument, reps)
	}
	e := openEnv(failNow{}, be, c.weights)
	defer e.release()
	defer func() {
		switch r := recover().(type) {
		case nil:
		case setupFailure:
			err = fmt.Errorf("optest.Time %s: %w", c.Name, r.err)
		default:
			panic(r)
		}
	}()
	call, _ := c.build(e)
	walls, devs := make([]time.Duration, reps), make([]time.Duration, reps)
	for i := -1; i < reps; i++ {
		t0 := time.Now()
		p, err := be.Begin(e.w, e.s)
		if err != nil {
			return Result{}, fmt.Errorf("optest.Time %s: %w", c.Name, err)
		}
		if err := call(p); err != nil {
			p.Abandon()
			return Result{}, fmt.Errorf("optest.Time %s: %w", c.Name, err)
		}
		tm, err := p.Commit()
		if err != nil {
			return Result{}, fmt.Errorf("optest.Time %s: %w", c.Name, err)
		}
		if i >= 0 {
			walls[i], devs[i] = time.Since(t0), tm.Total
		}
	}
	slices.Sort(walls)
	slices.Sort(devs)
	return Result{Name: c.Name, Reps: reps, Median: walls[reps/2], Min: walls[0], Device: devs[reps/2], Flops: c.Flops, Bytes: c.Bytes}, nil
}

// failNow is the tb of Time's setups: a failure ends the case (Time recovers it as its error).
type failNow struct{}

// setupFailure carries a setup's failure from failNow to Time.
type setupFailure struct{ err error }

func (failNow) Helper() {}

func (failNow) Fatal(args ...any) {
	if err, ok := args[0].(error); ok && len(args) == 1 {
		panic(setupFailure{err})
	}
	panic(setupFailure{errors.New(fmt.Sprint(args...))})
}

func (failNow) Fatalf(format string, args ...any) { panic(setupFailure{fmt.Errorf(format, args...)}) }

// timedOps are the ops whose tables Cases lists, with their entries.
var timedOps = []struct {
	op      string
	entries func() []entry
}{
	{"MatMul", matMulEntries}, {"SigmoidMul", eltEntries(sigmoidMulEntry)}, {"SwiGLU", eltEntries(swigluEntry)},
	{"GRRead", grReadEntries}, {"GRApplyMoEC", grApplyEntries}, {"MoEExperts", moeExpertsEntries},
	{"QSAPrep", qsaPrepEntries}, {"QSAIndex", qsaIndexEntries}, {"Attention", attentionEntries},
	{"GDNScan", gdnScanEntries},
}

// Cases lists the cases of the op tables that Time runs, named as their subtests: every case of
// MatMul, SigmoidMul, SwiGLU, GRRead, GRApplyMoEC, MoEExperts, QSAPrep, QSAIndex and GDNScan,
// and the attention over the indexer's selection (Attention/qsa/..., Attention/qsa_2pass/...).
func Cases() []Case {
	var cs []Case
	for _, o := range timedOps {
		for _, en := range o.entries() {
			cs = append(cs, en.timed(o.op))
		}
	}
	return cs
}

// timed is the entry as a Case of op.
func (en entry) timed(opName string) Case {
	return Case{Name: opName + "/" + en.name, Flops: en.flops, Bytes: en.bytes, build: en.build}
}
