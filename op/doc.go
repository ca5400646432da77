// Package op holds strata's op contracts and nothing that computes them: one args struct per op
// (its tensors and parameters, documented with shapes, dtypes and the source of the math) whose
// Check method is the only copy of the op's shape rules; Tensor and DType; the weight
// descriptors (Matrix, Experts, GRWeights, PLEWeights); the one family of sentinel errors; the
// host bookkeeping every backend needs (the QSA selection layout, the PLE n-gram hash, the RoPE
// frequencies); and the Backend and Pass interfaces that the CPU backend (package kernels) and
// the Metal backend (package metal) implement. op imports no backend, and the model runner in
// package strata is written once against it.
//
// The shared test harness of every backend is op/optest: one case table and one runner per op,
// compared with float64 references.
package op
