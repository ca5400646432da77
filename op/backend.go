package op

import "time"

// Backend runs the ops on one device. It allocates tensors, keeps weights uploaded once per
// model (Weights), hands out per-session scratch (Scratch) and opens Passes. The CPU backend
// (package kernels) and the Metal backend (package metal, on an Apple GPU or the MSL emulator)
// implement it; neither knows the other or the model. A Backend is safe for concurrent use;
// each Pass belongs to one goroutine.
type Backend interface {
	// Name is the backend's name: "cpu", "metal" or "emu" (Metal on the MSL emulator).
	Name() string
	// Kernels describes the kernel sets in use (CPU: the instruction sets and the BLAS; Metal:
	// the device and every kernel variant dispatched so far with its count).
	Kernels() string
	// NewTensor allocates a zeroed tensor of n elements of dt (F32 or I32). Errors wrap
	// ErrShape (n outside [0, MaxElems]), ErrDType or ErrOutOfMemory.
	NewTensor(dt DType, n int) (Tensor, error)
	// Free releases a tensor from NewTensor (a no-op for host memory); it must not be used after.
	Free(t Tensor)
	// NewWeights returns an empty per-model weight store: each Matrix, Experts and weight vector
	// an op reads through it is uploaded on first use (in its own dtype) and reused by later
	// Passes. Release frees them.
	NewWeights() Weights
	// NewScratch returns an empty per-session scratch arena (named activation buffers reused by
	// every layer and later prefills; op-internal temporaries are drawn from it too).
	NewScratch() Scratch
	// Begin opens a Pass whose ops read weights through w and take temporaries from s.
	Begin(w Weights, s Scratch) (Pass, error)
	// Variants lists the kernel variants run so far as "name xN" lines (the kernel report).
	Variants() []string
}

// Weights is a per-model weight store of one Backend (Backend.NewWeights).
type Weights interface {
	// Bytes is the weight memory the store holds on the device (0 where weights are used in
	// place, as on the CPU).
	Bytes() int64
	Release()
}

// Scratch is a per-session arena of named tensors of one Backend. Tensor returns the arena's
// tensor called name with n elements of dt (contents unspecified: every op overwrites its
// outputs), reallocating only when a call needs more than it holds; tensors of different names
// never overlap. A Scratch belongs to one sequence of Passes at a time.
type Scratch interface {
	Tensor(name string, dt DType, n int) (Tensor, error)
	// Bytes is the memory the scratch holds now.
	Bytes() int64
	Release()
}

// Pass is one unit of work on a Backend: the CPU runs each op at once (Commit only reports the
// timings); Metal encodes every op into one command buffer, commits it once and waits once, so
// host views of the tensors a Pass writes are valid only after Commit. Each op method checks its
// arguments first (the op's Check) and returns the first error; after an error the Pass must be
// abandoned. Abandon ends a Pass without running what was not run yet (on the CPU, ops already
// ran; callers restore state themselves).
type Pass interface {
	// Stage tags the ops that follow for the timings Commit reports (a caller-defined index,
	// 0 <= stage < 64).
	Stage(stage int)

	MatMul(MatMul) error
	RMSNorm(RMSNorm) error
	Add(Add) error
	SigmoidMul(SigmoidMul) error
	SwiGLU(SwiGLU) error
	RowSigmoidScale(RowSigmoidScale) error
	Copy(Copy) error
	Embed(Embed) error
	GRRead(GRRead) error
	GRWrite(GRWrite) error
	GRApplyMoEC(GRApplyMoEC) error
	GDNPre(GDNPre) error
	GDNScan(GDNScan) error
	GDNPost(GDNPost) error
	QSAPrep(QSAPrep) error
	QSAIndex(QSAIndex) error
	Attention(Attention) error
	TopKRoute(TopKRoute) error
	MoEExperts(MoEExperts) error
	MoECombine(MoECombine) error
	PLEApply(PLEApply) error

	// Commit runs (Metal) or finishes (CPU) the Pass and returns the time spent per stage
	// (index = the Stage tag). Where the device reports no per-dispatch time (Apple GPUs: strata
	// reads only the command buffer's GPUStartTime..GPUEndTime) only Total is set, to the whole
	// command buffer's GPU time, and Timing.PerStage is false. Errors wrap ErrBackend.
	Commit() (Timing, error)
	// Abandon ends the Pass without committing it.
	Abandon()
}

// Timing is the time a Pass spent per Stage tag.
type Timing struct {
	Stage []time.Duration
	// PerStage is false when the device reported only the whole Pass's time (in Total).
	PerStage bool
	// Total is the device time of the whole Pass (the sum of Stage when PerStage).
	Total time.Duration
}
