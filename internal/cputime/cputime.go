// Package cputime reads the CPU time the process and the calling thread have used, for stage
// timings and for benchmarks that must not count the time other processes take from their core.
// Where a clock is missing the readers say so (ok false) and callers report nothing.
package cputime
