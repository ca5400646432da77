// Package opcases is the single list of op test cases (shapes, dtypes, edge sizes) that every
// backend runs: the CPU backend in kernels, the Metal backend on the emulator and on Apple
// hardware. Each op family has its own table; inputs come from deterministic generators so a
// case means the same tensors everywhere.
package opcases
