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
	// NewWeights returns an empty per-model weight store configured by o: each Matrix, Experts
	// and weight vector an op reads through it is uploaded on first use (in its own dtype, or
	// the one Weights.Prepare chose) and reused by later Passes. Release frees them.
	NewWeights(o WeightOptions) Weights
	// NewScratch returns an empty per-session scratch arena (named activation buffers reused by
	// every layer and later prefills; op-internal temporaries are drawn from it too).
	NewScratch() Scratch
	// Begin opens a Pass whose ops read weights through w and take temporaries from s.
	Begin(w Weights, s Scratch) (Pass, error)
	// Variants lists the kernel variants run so far as "name xN" lines (the kernel report).
	Variants() []string
}

// WeightOptions configure a weight store (Backend.NewWeights). The zero value keeps every
// weight in its file format. Options that change how a backend holds the weights are fields
// here, read by Weights.Prepare.
type WeightOptions struct {
	// WidenBudget is how many bytes of float32 copies of BF16 and F16 matrices Weights.Prepare
	// may make, so that the products skip widening them on every call: 0 makes none, a negative
	// value has no limit. A copy holds the same values, so results do not change. A backend
	// whose kernels widen 16-bit weights in registers (Metal) makes none whatever the budget and
	// says so once in its log.
	WidenBudget int64
	// Compute is the arithmetic of the linear-layer products (ComputeMode; the zero value is
	// ComputeF32, today's float32 numerics). The CPU store gives each matrix whose format the
	// mode takes a ComputeForm at Prepare (packed once) and runs the rest in f32; Weights.Compute
	// says which ran with which kernel and why. The Metal backend runs f32 only: it logs that it
	// ignores another mode (strata.LoadModel refuses one on Metal).
	Compute ComputeMode
}

// Weights is a per-model weight store of one Backend (Backend.NewWeights).
type Weights interface {
	// Prepare returns the matrix the store's ops are to read in place of m. A loader hands it
	// each weight matrix of a model once, before the first Pass, in priority order (the ones
	// worth most first: the CPU widens a matrix only while its copies so far and this one fit
	// WidenBudget, so what comes first is widened first), and uses the matrix returned from
	// then on. The CPU store returns a float32 copy of a BF16 or F16 matrix that fits the
	// budget and m itself otherwise (F32, QAffine: quantized weights stay packed); Metal returns
	// m. Errors wrap the sentinels of Matrix.Validate; m is then unchanged and unused.
	Prepare(m *Matrix) (*Matrix, error)
	// Bytes is the weight memory the store made: the uploads to the device (Metal), the float32
	// copies of Prepare (CPU); weights read in place count nothing.
	Bytes() int64
	// Compute describes the store's compute mode: the mode, the kernel of each weight format
	// it ran through, how many matrices, and why any ran in f32, e.g. "int8: avx2 (vpmaddubsw)
	// with activations in blocks of 32 for 124 MLX 4-bit matrices; f32 for 2 F32 matrices (no
	// int8 form)".
	Compute() string
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
// timings); Metal records every op and at Commit commits them in order (in command buffers of a
// bounded size) and waits, so host views of the tensors a Pass writes are valid only after
// Commit. Each op method checks its
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
	// CPU, where the backend measures it (the CPU backend on Linux and macOS; nil elsewhere), is
	// the process's CPU time (user + system, every thread) during each stage's ops, and Sys its
	// system part: CPU / (Stage x the threads) is about how busy the cores were (strata.Stats
	// says how approximate).
	CPU, Sys []time.Duration
}
