package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// validatedEnv marks the child run of --validate (the layers are on in its environment).
const validatedEnv = "STRATA_SELFTEST_VALIDATED"

// validationEnv turns on Metal's API validation (MTL_DEBUG_LAYER), shader validation
// (MTL_SHADER_VALIDATION: bounds and null checks compiled into every pipeline) and the
// Objective-C runtime's report of objects autoreleased with no pool (OBJC_DEBUG_MISSING_POOLS).
// They are read when the frameworks load, so they are set in the environment of a new process.
var validationEnv = []string{"MTL_DEBUG_LAYER=1", "MTL_SHADER_VALIDATION=1", "OBJC_DEBUG_MISSING_POOLS=YES"}

// maxValidationLines bounds the messages the report quotes (stderr has them all).
const maxValidationLines = 100

// isValidationLine reports a line of stderr that Metal's validation layers or the Objective-C
// runtime wrote (not the test framework's own messages).
func isValidationLine(line string) bool {
	for _, s := range []string{"MTLDebug", "-[MTL", "validation", "Validation", "objc[", "MISSING POOLS", "autoreleased with no pool"} {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// runValidated reruns this command with the validation layers on, passes its stderr through,
// prints its report followed by a section of the validation messages it wrote, and returns the
// exit status: the child's, or 1 when it passed but a validation message was written.
func runValidated(report io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "selftest: --validate:", err)
		return 2
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(append(os.Environ(), validationEnv...), validatedEnv+"=1")
	var out, errs bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(os.Stderr, &errs)
	runErr := cmd.Run()
	status := 0
	var exit *exec.ExitError
	switch {
	case errors.As(runErr, &exit):
		status = exit.ExitCode()
	case runErr != nil:
		fmt.Fprintln(os.Stderr, "selftest: --validate:", runErr)
		return 2
	}
	var msgs []string
	for line := range strings.SplitSeq(errs.String(), "\n") {
		if isValidationLine(line) {
			msgs = append(msgs, strings.TrimSpace(line))
		}
	}
	var b strings.Builder
	b.WriteString(out.String())
	fmt.Fprintf(&b, "\n## Validation messages (%s)\n\n", strings.Join(validationEnv, " "))
	if status < 0 || (exit != nil && !exit.Exited()) {
		fmt.Fprintf(&b, "The run was stopped: %v (a validation layer aborts on an error; stderr has the details).\n\n", runErr)
	}
	if len(msgs) == 0 {
		b.WriteString("None.\n")
	}
	for i, m := range msgs {
		if i == maxValidationLines {
			fmt.Fprintf(&b, "- and %d more (stderr has them all)\n", len(msgs)-i)
			break
		}
		fmt.Fprintf(&b, "- `%s`\n", strings.ReplaceAll(m, "`", "'"))
	}
	fmt.Fprint(report, b.String())
	if status == 0 && len(msgs) > 0 {
		status = 1
	}
	return status
}
