package emu

import (
	"fmt"
	"strings"
)

// check reports the MSL rules (specification section 1.5.4, "Metal and C++", and chapter 4,
// address spaces) that C++ for OpenCL does not enforce itself. The rules clang enforces through
// the address-space types (conversions between address spaces, writes to constant, threadgroup
// variables outside kernels, double, thread_local, new) keep clang's diagnostics, named with the
// rule by ruleHint. Kernel signatures are checked by kernels and param.
func (r *rewriter) check() {
	kernelBody := r.kernelBodies()
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if tk.kind != tkIdent {
			continue
		}
		nx := r.next(i)
		pv := r.prev(i)
		member := r.is(pv, tkPunct, ".") || r.is(pv, tkPunct, ">") && r.is(pv-1, tkPunct, "-") || r.is(pv, tkPunct, "::")
		if member {
			continue
		}
		switch tk.text {
		case "double":
			r.errorf(i, "double is not supported: Metal has no 64-bit floating-point type (MSL 2.1)")
		case "virtual":
			r.errorf(i, "virtual functions are not supported (MSL 1.5.4)")
		case "goto":
			r.errorf(i, "the goto statement is not supported (MSL 1.5.4)")
		case "thread_local", "register":
			r.errorf(i, "the %s storage class is not supported (MSL 1.5.4)", tk.text)
		case "new":
			r.errorf(i, "the new operator is not supported (MSL 1.5.4)")
		case "delete":
			if !r.is(pv, tkPunct, "=") {
				r.errorf(i, "the delete operator is not supported (MSL 1.5.4)")
			}
		case "typeid", "dynamic_cast":
			r.errorf(i, "%s is not supported: MSL has no run-time type information (MSL 1.5.4)", tk.text)
		case "try", "catch", "throw":
			r.errorf(i, "exceptions (%s) are not supported (MSL 1.5.4)", tk.text)
		case "std":
			if r.is(nx, tkPunct, "::") {
				r.errorf(i, "std:: is not available: MSL has no C++ standard library; use the metal:: equivalent (MSL 1.5.4)")
			}
		case "printf", "fprintf", "puts":
			if r.is(nx, tkPunct, "(") {
				r.errorf(i, "%s is not available in MSL; log with os_log from <metal_logging> (MSL 1.5.4, 6.19)", tk.text)
			}
		case "threadgroup":
			r.checkThreadgroupDecl(i, kernelBody)
		case "static":
			if r.sc.kind[i].inFunction() && r.stmtStart(i) == i && !r.is(nx, tkIdent, "assert") {
				if !r.stmtHas(i, "constant") {
					r.errorf(i, "static variables in functions are not supported; declare the variable in the constant address space (MSL 4.2, 1.5.4)")
				}
			}
		}
	}
	r.checkProgramScope()
}

// kernelBodies marks, for each function body opened at brace b, whether it is a kernel's.
func (r *rewriter) kernelBodies() map[int]bool {
	out := map[int]bool{}
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if r.sc.kind[i] != scNamespace {
			continue
		}
		isKernel := tk.kind == tkIdent && tk.text == "kernel"
		if tk.kind == tkAttr && strings.Contains(tk.text, "kernel") {
			for _, a := range parseAttrs(tk.text) {
				isKernel = isKernel || a.name == "kernel"
			}
		}
		if !isKernel {
			continue
		}
		open := r.findPunct(i, "(")
		if open < 0 {
			continue
		}
		closeAt := r.match(open)
		b := r.next(closeAt)
		for b < len(r.t) && r.t[b].kind == tkAttr {
			b = r.next(b)
		}
		if r.is(b, tkPunct, "{") {
			out[b] = true
			i = r.match(b)
		}
	}
	return out
}

// stmtHas reports whether the statement starting at s (up to its ';' or '{') has identifier w.
func (r *rewriter) stmtHas(s int, w string) bool {
	for k := s; k < len(r.t); k++ {
		if r.t[k].kind == tkPunct && (r.t[k].text == ";" || r.t[k].text == "{" || r.t[k].text == "=") {
			return false
		}
		if r.is(k, tkIdent, w) {
			return true
		}
	}
	return false
}

// checkThreadgroupDecl checks a declaration that starts with the threadgroup qualifier: threadgroup
// variables (not pointers or references to threadgroup memory) exist only in kernel functions and
// take no initializer.
func (r *rewriter) checkThreadgroupDecl(i int, kernelBody map[int]bool) {
	pv := r.prev(i)
	if r.t[max(pv, 0)].kind == tkIdent && (r.t[pv].text == "static" || r.t[pv].text == "const") {
		pv = r.prev(pv) // `static threadgroup ...`, `const threadgroup ...`
	}
	if !(r.boundary(pv) || r.is(pv, tkPunct, ":")) {
		return
	}
	e := i
	depth := 0
	eq := -1
	indirect := false
	for ; e < len(r.t); e++ {
		tk := r.t[e]
		if tk.kind != tkPunct {
			continue
		}
		switch tk.text {
		case "(", "[", "<":
			if tk.text == "(" && depth == 0 && eq < 0 {
				return // a function returning a threadgroup pointer, a parameter list
			}
			depth++
		case ")", "]", ">":
			depth--
		case "*", "&":
			if depth == 0 && eq < 0 {
				indirect = true
			}
		case "=":
			if depth == 0 && eq < 0 {
				eq = e
			}
		case "{":
			if depth == 0 && eq < 0 {
				eq = e
			}
		}
		if tk.text == ";" || tk.text == "," && depth == 0 && eq < 0 && indirect {
			break
		}
		if tk.text == ";" {
			break
		}
	}
	if indirect {
		return
	}
	k := r.sc.kind[i]
	fn := r.sc.funcOf[i]
	switch {
	case k == scNamespace:
		r.errorf(i, "a threadgroup variable cannot be declared at program scope: declare it in a kernel function (MSL 4.4)")
	case k == scClass:
		r.errorf(i, "a struct member cannot be declared in the threadgroup address space (MSL 4.4)")
	case k.inFunction() && (fn < 0 || !kernelBody[fn]):
		r.errorf(i, "a threadgroup variable can only be declared in a kernel function, not in a helper function (MSL 4.4)")
	case eq >= 0:
		r.errorf(eq, "a threadgroup variable cannot be initialized in its declaration (MSL 4.4)")
	}
}

// checkProgramScope checks declarations at program scope: variables must be in the constant
// address space and initialized.
func (r *rewriter) checkProgramScope() {
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if r.sc.kind[i] != scNamespace || tk.kind == tkSpace || tk.kind == tkDirective || tk.text == "" || r.pdepth[i] != 0 {
			continue
		}
		if r.stmtStart(i) != i {
			continue
		}
		// The statement up to its ';' or body.
		e := i
		depth := 0
		hasParen, hasEq, hasConstant, isDecl, typeDef := false, false, false, true, false
		for ; e < len(r.t); e++ {
			t := r.t[e]
			if t.kind == tkIdent && depth == 0 {
				switch t.text {
				case "template", "using", "typedef", "namespace", "static_assert",
					"extern", "friend", "operator", "kernel", "vertex", "fragment", "__attribute__":
					isDecl = false
				case "struct", "class", "union", "enum":
					typeDef = true
				case "constant":
					hasConstant = true
				}
			}
			if t.kind == tkAttr && depth == 0 {
				for _, a := range parseAttrs(t.text) {
					if a.name == "kernel" || a.name == "function_constant" {
						isDecl = false
					}
				}
			}
			if t.kind != tkPunct {
				continue
			}
			if t.text == "(" && depth == 0 && !hasEq {
				hasParen = true
			}
			switch t.text {
			case "(", "[", "<":
				depth++
			case ")", "]", ">":
				depth--
			case "=":
				if depth == 0 {
					hasEq = true
				}
			}
			if t.text == "{" && depth == 0 && !hasEq {
				if k := r.sc.opens[e]; k == scClass || k == scEnum {
					// `typedef struct {...} name;`, `struct S {...} s;`: the statement goes on.
					typeDef = true
					e = r.match(e)
					continue
				}
				break
			}
			if depth == 0 && t.text == ";" {
				break
			}
			if t.text == "{" && hasEq {
				e = r.match(e)
			}
		}
		if e >= len(r.t) {
			return
		}
		// `constant constexpr T X<A>::m[8];` defines a static member declared (and initialized) in
		// its class.
		qualified := false
		for k := i; k < e; k++ {
			if r.is(k, tkPunct, "::") && r.pdepth[k] == 0 {
				qualified = true
			}
		}
		// A class or enum definition declares a variable only if a name follows its body:
		// `struct S {...} s;` (`struct S;` and `struct S {...};` declare none).
		if typeDef && isDecl {
			isDecl = r.t[r.prev(e)].kind == tkIdent && r.is(r.prev(r.prev(e)), tkPunct, "}")
		}
		if isDecl && !hasParen && r.is(e, tkPunct, ";") && e > i && !(qualified && hasConstant) {
			switch {
			case !hasConstant:
				r.errorf(i, "a program-scope variable must be declared in the constant address space (MSL 4.2): %s",
					strings.Join(strings.Fields(r.text(i, e)), " "))
			case !hasEq && !r.hasBraceInit(i, e):
				r.errorf(i, "a program-scope constant must be initialized (MSL 4.2)")
			}
		}
		if r.is(e, tkPunct, "{") && r.sc.opens[e] != scNamespace {
			e = r.match(e)
		}
		i = e
	}
}

func (r *rewriter) hasBraceInit(i, e int) bool {
	for k := i; k < e; k++ {
		if r.is(k, tkPunct, "{") {
			return true
		}
	}
	return false
}

// Diagnostic is a compile error or warning at a place in the source (line and column 1-based;
// Line 0 when the place is unknown), or a note attached to the one before it.
type Diagnostic struct {
	File      string
	Line, Col int
	Severity  string // "error", "warning" or "note"
	Msg       string
}

func diagAt(p srcPos, severity, msg string) Diagnostic {
	return Diagnostic{File: p.file, Line: p.line, Col: p.col, Severity: severity, Msg: msg}
}

func (d Diagnostic) String() string {
	switch {
	case d.Line <= 0 && d.File == "":
		return fmt.Sprintf("%s: %s", d.Severity, d.Msg)
	case d.Line <= 0:
		return fmt.Sprintf("%s: %s: %s", d.File, d.Severity, d.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s", d.File, d.Line, d.Col, d.Severity, d.Msg)
}
