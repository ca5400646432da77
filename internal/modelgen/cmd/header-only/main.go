// Command header-only writes a published release's checkpoint without its weights
// (modelgen.WriteHeaderOnly): config.json, the shard index and every shard with its complete
// header, the data sections sparse (or, with -truncate, absent). It is how the README's
// --inspect example is made:
//
//	go run ./internal/modelgen/cmd/header-only RELEASE /tmp/RELEASE
//	go run ./cmd/strata --model /tmp/RELEASE --inspect
//
// The releases are every family's (family/NAME/gen); the usage message lists them.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/stratakernels/strata/internal/modelgen"
)

func main() {
	truncate := flag.Bool("truncate", false, "end each shard after its header and the PLE buffers instead of writing a sparse file of the full size")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: header-only [-truncate] RELEASE DIR (releases: %s)\n", strings.Join(modelgen.ReleaseNames(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	r, ok := modelgen.Releases[flag.Arg(0)]
	if !ok {
		fmt.Fprintf(os.Stderr, "header-only: unknown release %q (have %s)\n", flag.Arg(0), strings.Join(modelgen.ReleaseNames(), ", "))
		os.Exit(2)
	}
	if err := modelgen.WriteHeaderOnly(flag.Arg(1), r, modelgen.HeaderOnly{Truncate: *truncate}); err != nil {
		fmt.Fprintln(os.Stderr, "header-only:", err)
		os.Exit(1)
	}
}
