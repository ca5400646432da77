package kernels

import (
	"testing"

	"go.uber.org/goleak"
)

// The ops start goroutines (parallelFor, the expert pool); none may outlive a call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
