// Package optest is the op case table of strata and one runner per op of op.Pass that every
// backend runs against float64 references (the model: ggml's test-backend-ops, gonum's
// testblas). A backend's test calls
//
//	optest.Run(t, backend, optest.Options{})
//
// which runs, per op, every case of its table as a subtest "Op/case": tensors allocated with
// Backend.NewTensor and Scratch.Tensor (outputs filled with NaN canaries first), host views
// filled, weights read through one Backend.NewWeights store, the op called in a Pass that is
// committed, the results read back and compared with the op's float64 reference as
// max |got - want| / max |want| under the output's tolerance (Tolerances). Integer outputs
// (slot rows, selections, expert indices) and copies (Copy, Embed, the gate of QSAPrep, cache
// rows) must match exactly; routings and selections may differ from the reference only at
// float64 near-ties, never at exact ties (those go to the lower index). RunMatMul, RunGRRead, ...
// run one op.
//
// Each op also has a table of bad arguments ("Op/bad/name": wrong lengths and dtypes, missing
// tensors, parameters out of range) that every backend must refuse with an error wrapping the
// sentinel the op's Check documents (op.ErrShape, op.ErrDType, op.ErrInvalidArgument) without
// changing any tensor of the call.
//
// The cases are small versions of the real models' shapes at the token counts around 64-row
// tiles (T = 1, 3, 17, 63, 64, 65, 300; 2050 for attention and QSA, past the 2048-token budget)
// with every weight dtype (F32, BF16, F16). Inputs come from the deterministic generators
// (Floats, Uniform, Tokens, Slots, the cases' Inputs methods), so a case means the same tensors
// on every backend and platform. The whole table runs in seconds on the CPU backend.
// Options.Short keeps the representative subset marked in the tables for slow backends (the
// Metal backend on the MSL emulator, about 100x slower); Options.Filter selects cases by name,
// Options.Before/After run around each case (to prefer a kernel variant and check the variant
// report), Options.Observe sees every compared output (to compare variants bitwise), and
// Options.TolScale / Options.Tol loosen tolerances for backends that sum in other orders.
//
// The timing mode runs the same cases outside a test, on any backend, and times them (as
// test-backend-ops has a perf mode over its case table): Cases lists the table's cases of the
// GEMM, MoE, GatedResidual, attention and GDN ops by their subtest names, BenchCases the same
// case types at the real models' widths (BenchPeak: the 2048^3 GEMM the rates are given
// against), and Time runs one, a Pass per repetition after a warm-up, reporting the median time
// and the case's FLOP or byte count. A case's inputs are built by the same code in both modes.
//
// The references (RefMatMul, RefAttention, RefGDNScan, ...) share no code with any backend; the
// package imports op and no backend.
package optest
