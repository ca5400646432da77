// Command mslc compiles Metal Shading Language files as strata's MSL emulator does, for kernel
// authors without a Mac: preprocessing, the MSL rule checks (MSL specification section 1.5.4 and
// chapter 4: no double, goto, new, virtual, thread_local, static locals, the standard library;
// program-scope variables in constant; threadgroup variables only in kernels and without
// initializers; kernel signatures), address spaces as checked types (device, constant,
// threadgroup and thread pointers do not convert into each other; constant is read-only), and
// clang. Diagnostics go to standard error as file:line:col: error: message, naming the MSL rule
// each enforces; the exit status is 1 when any file has an error, 2 on bad usage.
//
// Usage:
//
//	go run ./emu/cmd/mslc [flags] FILE.metal...
//
// Flags (clang's spelling; -DNAME and -Idir also work joined):
//
//	-include FILE  prepend FILE to every source (repeatable)
//	-I DIR         add DIR to the #include "..." search path (repeatable)
//	-D NAME[=VAL]  define a macro (repeatable)
//	-o LIB         also generate code: write the emulator's library for the (single) FILE
//	-asan          with -o, build the AddressSanitizer helper instead of a shared object
//	-lax           report violations of the rules the emulator checks itself as warnings
//	-v             list each file's kernels and function constants
//
// Without -o, mslc checks only (clang -fsyntax-only): about half the time of a full compile.
// It needs clang++-16 (Debian clang-16) or $STRATA_CLANG.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stratakernels/strata/emu"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// splitJoined turns clang's joined -DNAME and -Idir into -D NAME and -I dir.
func splitJoined(args []string) []string {
	var out []string
	for _, a := range args {
		if len(a) > 2 && (strings.HasPrefix(a, "-D") || strings.HasPrefix(a, "-I")) && a[2] != '=' {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mslc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var includes, dirs, defines list
	fs.Var(&includes, "include", "prepend `FILE` to every source (repeatable)")
	fs.Var(&dirs, "I", "add `DIR` to the include search path (repeatable)")
	fs.Var(&defines, "D", "define `NAME[=VALUE]` (repeatable)")
	out := fs.String("o", "", "write the emulator's library for the single input to `LIB`")
	asan := fs.Bool("asan", false, "with -o, build the AddressSanitizer helper")
	lax := fs.Bool("lax", false, "report violations of the rules the emulator checks itself as warnings")
	verbose := fs.Bool("v", false, "list each file's kernels and function constants")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mslc [flags] FILE.metal...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(splitJoined(args)); err != nil {
		return 2
	}
	files := fs.Args()
	var why string
	switch {
	case len(files) == 0:
		why = "no input file"
	case *out != "" && len(files) != 1:
		why = fmt.Sprintf("-o writes the library of one input, got %d", len(files))
	case *asan && *out == "":
		why = "-asan builds the library -o writes: give -o LIB"
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "o" && *out == "" && why == "" {
			why = "-o is empty: give the library's file name"
		}
	})
	if st, err := os.Stat(*out); why == "" && *out != "" && err == nil && st.IsDir() {
		why = fmt.Sprintf("-o %s is a directory: give the library's file name", *out)
	}
	if why != "" {
		fmt.Fprintf(stderr, "mslc: %s\n", why)
		fs.Usage()
		return 2
	}
	status := 0
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			if err == nil {
				err = fmt.Errorf("%s is a directory", f)
			}
			fmt.Fprintf(stderr, "%s: error: %v\n", f, err)
			status = 1
			continue
		}
		res, ds, err := emu.CompileFile(f, emu.CompileOptions{Includes: includes, IncludeDirs: dirs, Defines: defines,
			Lax: *lax, Library: *out, ASan: *asan})
		fmt.Fprint(stderr, emu.FormatDiagnostics(ds))
		if err != nil {
			if len(ds) == 0 {
				fmt.Fprintf(stderr, "%s: error: %v\n", f, err)
			}
			status = 1
			continue
		}
		if *verbose {
			fmt.Fprintf(stdout, "%s: %d kernels\n", f, len(res.Kernels))
			for _, k := range res.Kernels {
				fmt.Fprintf(stdout, "  kernel %s\n", k)
			}
			for _, c := range res.Constants {
				fmt.Fprintf(stdout, "  function constant %s\n", c)
			}
		}
	}
	return status
}
