package emu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var clangDiagLine = regexp.MustCompile(`^(.*?):(\d+):(\d+): (fatal error|error|warning|note): (.*)$`)

// clangDiagnostics reads clang's diagnostics on the generated file: positions on source lines map
// back to the source columns (lines are the source's already, through #line markers); the stand-in
// headers are named <metal>/...; messages speak MSL (address spaces by their MSL names) and name
// the MSL rule where they enforce one. Source snippets and carets, which show generated code, are
// dropped.
func (p *program) clangDiagnostics(out string) []Diagnostic {
	var ds []Diagnostic
	for _, line := range strings.Split(out, "\n") {
		m := clangDiagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		file := m[1]
		ln, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		if segs, ok := p.lines[lineKey{file, ln}]; ok {
			col = sourceCol(segs, col)
		}
		if strings.HasPrefix(file, "include/") {
			file = "<metal>/" + strings.TrimPrefix(file, "include/")
		}
		sev := m[4]
		if sev == "fatal error" {
			sev = "error"
		}
		msg := mslTypes(m[5])
		if i := strings.LastIndex(msg, " [-W"); i >= 0 && strings.HasSuffix(msg, "]") {
			msg = msg[:i]
		}
		if sev == "error" {
			if h := ruleHint(msg); h != "" {
				msg += " " + h
			}
		}
		ds = append(ds, Diagnostic{File: file, Line: ln, Col: col, Severity: sev, Msg: msg})
	}
	return dropLauncherEcho(relocate(ds))
}

// launcherFile names the launchers the emulator appends to a kernel file.
const launcherFile = "<emu launchers>"

// dropLauncherEcho removes the diagnostics on the generated launchers when the user's source
// has an error of its own: an unbalanced brace in the kernel file swallows the launchers, and
// their errors would only hide the one that matters.
func dropLauncherEcho(ds []Diagnostic) []Diagnostic {
	own := false
	for _, d := range ds {
		own = own || d.Severity == "error" && d.File != launcherFile
	}
	if !own {
		return ds
	}
	out := ds[:0:0]
	for _, d := range ds {
		if d.File != launcherFile {
			out = append(out, d)
		}
	}
	return out
}

// relocate moves an error the stand-in headers report (a static_assert, a failed instantiation)
// to the first place in the user's source its notes lead to, keeping the header's place as a
// note, and names the rule an error's notes reveal (an overload not viable for address spaces).
func relocate(ds []Diagnostic) []Diagnostic {
	var out []Diagnostic
	for i := 0; i < len(ds); i++ {
		d := ds[i]
		if d.Severity != "error" {
			out = append(out, d)
			continue
		}
		j := i + 1
		for j < len(ds) && ds[j].Severity == "note" {
			j++
		}
		notes := ds[i+1 : j]
		if strings.Contains(d.Msg, "is ambiguous") && !strings.Contains(d.Msg, "(MSL") {
			for _, n := range notes {
				if strings.HasPrefix(n.File, "<metal>/emu_math.h") {
					d.Msg += " (MSL 6: the operands of a math function have one type; they are not converted to a common type)"
					break
				}
			}
		}
		// The stand-in headers' overload candidates are many and say little: one note for them.
		var kept []Diagnostic
		hidden := 0
		for _, n := range notes {
			if strings.HasPrefix(n.File, "<metal>/") && strings.HasPrefix(n.Msg, "candidate ") {
				hidden++
				continue
			}
			kept = append(kept, n)
		}
		if hidden > 0 {
			kept = append(kept, Diagnostic{Severity: "note", Msg: fmt.Sprintf("%d candidates of the stand-in headers not shown", hidden)})
		}
		notes = kept
		if !strings.Contains(d.Msg, "(MSL") {
			for _, n := range notes {
				if strings.HasPrefix(n.Msg, "built-in candidate") {
					continue // operator(double) and the like: candidates, no rule
				}
				if h := ruleHint(n.Msg); h != "" {
					d.Msg += " " + h
					break
				}
			}
		}
		var moved []Diagnostic
		if strings.HasPrefix(d.File, "<") {
			for _, n := range notes {
				if !strings.HasPrefix(n.File, "<") && n.Line > 0 {
					hdr := Diagnostic{File: d.File, Line: d.Line, Col: d.Col, Severity: "note", Msg: "in the stand-in header"}
					d.File, d.Line, d.Col = n.File, n.Line, n.Col
					moved = append(moved, hdr)
					break
				}
			}
		}
		out = append(out, d)
		out = append(out, moved...)
		out = append(out, notes...)
		i = j - 1
	}
	return out
}

// mslTypes writes C++ for OpenCL's address-space names as MSL's.
func mslTypes(msg string) string {
	return strings.NewReplacer("__global ", "device ", "__constant ", "constant ", "__local ", "threadgroup ",
		"__private ", "thread ", "__generic ", "", " __private", "", "*__private", "*", "&__private", "&",
		"__global", "device", "__constant", "constant", "__local", "threadgroup", "__private", "thread",
		"__generic", "").Replace(msg)
}

// ruleHint names the MSL rule behind a clang error, or returns "".
func ruleHint(msg string) string {
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(msg, x) {
				return true
			}
		}
		return false
	}
	spaces := has("device ", "constant ", "threadgroup ", "thread ", "'device", "'constant", "'threadgroup", "'thread")
	switch {
	case has("read-only variable is not assignable", "cannot assign to variable") && spaces,
		has("read-only variable is not assignable"):
		return "(MSL 4.2: the constant address space is read-only)"
	case has("must be initialized") && has("constant"):
		return "(MSL 4.2: a variable in the constant address space must be initialized)"
	case has("cannot initialize object parameter", "'this' argument"):
		return "(MSL 4.x: a member function called on an object in the device, constant or threadgroup address space must be declared with that address space)"
	case has("cannot pass pointer to address space", "cannot pass pointer to address space"):
		return "(MSL 4: device, constant, threadgroup and thread are distinct address spaces; pointers and references do not convert between them)"
	case has("changes address space", "address space", "cannot initialize", "cannot bind", "no viable conversion",
		"incompatible", "cannot convert", "C-style cast", "static_cast", "reinterpret_cast", "casting") && spaces:
		return "(MSL 4: device, constant, threadgroup and thread are distinct address spaces; pointers and references do not convert between them)"
	case has("function scope variable cannot be declared in", "variable cannot be declared in local address space",
		"non-kernel function variable"):
		return "(MSL 4.4: threadgroup variables are declared in kernel functions only)"
	case has("cl_khr_fp64", "double"):
		return "(MSL 2.1: there is no double type)"
	case has("no matching function for call to 'min'", "no matching function for call to 'max'",
		"no matching function for call to 'clamp'", "no matching function for call to 'fmin'",
		"no matching function for call to 'fmax'", "no matching function for call to 'mix'",
		"no matching function for call to 'pow'", "no matching function for call to 'select'"):
		return "(MSL 6: the operands of a math function have one type; they are not converted to a common type)"
	case has("use of undeclared identifier 'std'"):
		return "(MSL 1.5.4: there is no C++ standard library)"
	}
	return ""
}

// hasErrors reports whether ds holds an error.
func hasErrors(ds []Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == "error" {
			return true
		}
	}
	return false
}

// formatDiagnostics renders diagnostics one a line.
func formatDiagnostics(ds []Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}
