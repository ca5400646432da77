package metal

import "github.com/stratakernels/strata/metal/mtl"

// The NSError of a failed newFunctionWithName:constantValues:error: tells a missing function from
// one that exists but cannot be specialised: domain MTLLibraryErrorDomain, code
// MTLLibraryErrorFunctionNotFound (5) for the first, MTLLibraryErrorCompileFailure (3) for the
// second (a function constant of the wrong type, or missing without a default) (MTLLibrary.h).
const (
	mtlLibraryErrorDomain           = "MTLLibraryErrorDomain"
	mtlLibraryErrorCompileFailure   = 3
	mtlLibraryErrorFunctionNotFound = 5
)

// functionErrorKind is the mtl error a failed newFunctionWithName:constantValues:error: wraps,
// from its NSError's domain and code: mtl.ErrNoFunction for FunctionNotFound only, mtl.ErrCompile
// for every other failure (CompileFailure, other codes, another domain, no NSError at all), as
// the emulator reports the same mistakes.
func functionErrorKind(domain string, code int) error {
	if domain == mtlLibraryErrorDomain && code == mtlLibraryErrorFunctionNotFound {
		return mtl.ErrNoFunction
	}
	return mtl.ErrCompile
}
