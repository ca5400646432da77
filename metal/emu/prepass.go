package emu

import (
	"fmt"
	"strconv"
	"strings"
)

// The pre-pass turns preprocessed MSL into C++ that clang compiles against the stand-in headers:
// it rewrites what clang cannot take (vector constructors, same-size vector casts, kernel-scope
// threadgroup arrays, host_name instantiations, function constants), reads the kernel attributes
// and emits one launcher per kernel.

type paramKind int

const (
	pBuffer paramKind = iota
	pThreadgroup
	pBuiltin
)

type param struct {
	typ, name string
	kind      paramKind
	index     int    // buffer or threadgroup index
	builtin   string // attribute name of a position builtin
}

type kernelDef struct {
	name, host string
	template   bool
	params     []param
	maxThreads int
}

// kernelInst is one callable kernel: a plain kernel, or a template kernel instantiated under a host name.
type kernelInst struct {
	host  string
	def   *kernelDef
	targs string
}

type funcConst struct {
	name, typ string
	index     int
}

type program struct {
	cpp string
	// tensor reports that the source includes <metal_tensor> or MetalPerformancePrimitives: the
	// tensor-op header is included and the file compiles as C++20.
	tensor    bool
	kernels   []kernelInst
	constants []funcConst
}

// builtinExpr maps a position attribute to the launcher expression of its value.
var builtinExpr = map[string]string{
	"thread_position_in_grid":             "::emu::pos3(i->tpig)",
	"thread_position_in_threadgroup":      "::emu::pos3(i->tpitg)",
	"threadgroup_position_in_grid":        "::emu::pos3(i->tgpig)",
	"threads_per_threadgroup":             "::emu::pos3(i->tptg)",
	"dispatch_threads_per_threadgroup":    "::emu::pos3(i->tptg)",
	"threadgroups_per_grid":               "::emu::pos3(i->tgpg)",
	"threads_per_grid":                    "::emu::pos3(i->tpg)",
	"thread_index_in_threadgroup":         "::emu::pos1(i->tiitg)",
	"thread_index_in_simdgroup":           "::emu::pos1(i->simd_lane)",
	"simdgroup_index_in_threadgroup":      "::emu::pos1(i->simd_group)",
	"threads_per_simdgroup":               "::emu::pos1(i->simd_width)",
	"thread_execution_width":              "::emu::pos1(i->simd_width)",
	"simdgroups_per_threadgroup":          "::emu::pos1(i->simd_groups)",
	"dispatch_simdgroups_per_threadgroup": "::emu::pos1(i->simd_groups)",
}

var vecTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []string{"float", "half", "int", "uint", "short", "ushort", "char", "uchar", "long", "ulong", "bool"} {
		for _, n := range []string{"2", "3", "4", "8", "16"} {
			m[t+n] = true
		}
	}
	m["bfloat2"], m["bfloat3"], m["bfloat4"] = true, true, true
	return m
}()

type rewriter struct {
	t     []token
	depth []int // brace depth before each token
}

func (r *rewriter) next(i int) int {
	for i++; i < len(r.t) && r.t[i].kind == tkSpace; i++ {
	}
	return i
}

func (r *rewriter) prev(i int) int {
	for i--; i >= 0 && r.t[i].kind == tkSpace; i-- {
	}
	return i
}

func (r *rewriter) is(i int, kind tokKind, text string) bool {
	return i >= 0 && i < len(r.t) && r.t[i].kind == kind && r.t[i].text == text
}

// match returns the index of the token closing the bracket at i.
func (r *rewriter) match(i int) int {
	open := r.t[i].text
	closer := map[string]string{"(": ")", "{": "}", "[": "]", "<": ">"}[open]
	d := 0
	for j := i; j < len(r.t); j++ {
		if r.t[j].kind != tkPunct {
			continue
		}
		switch r.t[j].text {
		case open:
			d++
		case closer:
			d--
			if d == 0 {
				return j
			}
		}
	}
	return len(r.t) - 1
}

func (r *rewriter) text(i, j int) string {
	var b strings.Builder
	for k := i; k < j; k++ {
		b.WriteString(r.t[k].text)
	}
	return b.String()
}

// replace sets tokens [i, j) to text, keeping their newlines.
func (r *rewriter) replace(i, j int, text string) {
	nl := newlines(r.text(i, j))
	for k := i; k < j; k++ {
		r.t[k] = token{tkSpace, ""}
	}
	r.t[i] = token{tkSpace, text + nl}
}

func (r *rewriter) computeDepth() {
	r.depth = make([]int, len(r.t))
	d := 0
	for i, tk := range r.t {
		r.depth[i] = d
		if tk.kind == tkPunct {
			if tk.text == "{" {
				d++
			} else if tk.text == "}" {
				d--
			}
		}
	}
}

// stmtStart returns the first token of the statement containing i.
func (r *rewriter) stmtStart(i int) int {
	for j := i - 1; j >= 0; j-- {
		tk := r.t[j]
		if tk.kind == tkDirective || tk.kind == tkPunct && (tk.text == ";" || tk.text == "{" || tk.text == "}") {
			return r.next(j)
		}
	}
	return r.next(-1)
}

func (r *rewriter) findPunct(i int, text string) int {
	for ; i < len(r.t); i++ {
		if r.t[i].kind == tkPunct && r.t[i].text == text {
			return i
		}
	}
	return -1
}

func prepass(src string) (*program, error) {
	r := &rewriter{t: tokenize(src)}
	r.computeDepth()
	p := &program{}
	if err := r.functionConstants(p); err != nil {
		return nil, err
	}
	r.computeDepth()
	defs, err := r.kernels()
	if err != nil {
		return nil, err
	}
	insts, err := r.instantiations(defs)
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if !d.template {
			p.kernels = append(p.kernels, kernelInst{host: d.host, def: d})
		}
	}
	p.kernels = append(p.kernels, insts...)
	r.vectors()
	var b strings.Builder
	b.WriteString("#include \"emu_prelude.h\"\n")
	// The stub headers of the preprocessing pass leave linemarkers naming them.
	if strings.Contains(src, "stub/metal_tensor\"") || strings.Contains(src, "stub/MetalPerformancePrimitives/") {
		p.tensor = true
		b.WriteString("#include \"emu_tensor.h\"\n")
	}
	b.WriteString(r.text(0, len(r.t)))
	b.WriteString("\n# 1 \"<emu launchers>\"\n")
	seen := map[string]bool{}
	for k, inst := range p.kernels {
		if seen[inst.host] {
			return nil, fmt.Errorf("kernel name %q defined twice", inst.host)
		}
		seen[inst.host] = true
		b.WriteString(launcher(k, inst))
	}
	b.WriteString("extern \"C\" const emu_kernel emu_kernels[] = {\n")
	for k, inst := range p.kernels {
		fmt.Fprintf(&b, "  {%q, emu_entry_%d, %d},\n", inst.host, k, inst.def.maxThreads)
	}
	if len(p.kernels) == 0 {
		b.WriteString("  {nullptr, nullptr, 0},\n")
	}
	fmt.Fprintf(&b, "};\nextern \"C\" const int emu_nkernels = %d;\n", len(p.kernels))
	p.cpp = b.String()
	return p, nil
}

func launcher(k int, inst kernelInst) string {
	var args []string
	for _, prm := range inst.def.params {
		switch prm.kind {
		case pBuffer:
			args = append(args, fmt.Sprintf("::emu::buffer(%d)", prm.index))
		case pThreadgroup:
			args = append(args, fmt.Sprintf("::emu::tg_dynamic(%d)", prm.index))
		default:
			args = append(args, builtinExpr[prm.builtin])
		}
	}
	callee := inst.def.name
	if inst.def.template {
		callee += "<" + inst.targs + ">"
	}
	return fmt.Sprintf("static void emu_entry_%d() {\n  const emu_lane_info* i = emu_info();\n  (void)i;\n  %s(%s);\n}\n",
		k, callee, strings.Join(args, ", "))
}

// functionConstants rewrites `constant T name [[function_constant(n)]];` and namespace-scope
// constants initialised from them into accessors read at run time.
func (r *rewriter) functionConstants(p *program) error {
	names := map[string]string{} // name -> accessor call
	for a := range r.t {
		if r.t[a].kind != tkAttr || !strings.Contains(r.t[a].text, "function_constant") {
			continue
		}
		at := parseAttrs(r.t[a].text)
		if len(at) != 1 || at[0].name != "function_constant" {
			continue
		}
		idx, err := strconv.Atoi(at[0].arg)
		if err != nil || idx < 0 || idx >= maxConstants {
			return fmt.Errorf("function_constant(%s): index must be an integer in [0, %d)", at[0].arg, maxConstants)
		}
		s, e := r.stmtStart(a), r.findPunct(a, ";")
		nameAt := r.prev(a)
		if e < 0 || nameAt < s || r.t[nameAt].kind != tkIdent {
			return fmt.Errorf("cannot parse function constant declaration %q", r.text(s, a+1))
		}
		typ := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.text(s, nameAt)), "constant"))
		name := r.t[nameAt].text
		p.constants = append(p.constants, funcConst{name: name, typ: typ, index: idx})
		r.replace(s, e+1, fmt.Sprintf("static inline %s emu_fc_%s() { return ::emu::fc<%s>(%d); }", typ, name, typ, idx))
		names[name] = "emu_fc_" + name + "()"
		// is_function_constant_defined(name)
		for i := e; i < len(r.t); i++ {
			if !r.is(i, tkIdent, "is_function_constant_defined") {
				continue
			}
			o := r.next(i)
			n := r.next(o)
			c := r.next(n)
			if r.is(o, tkPunct, "(") && r.is(n, tkIdent, name) && r.is(c, tkPunct, ")") {
				r.replace(i, c+1, fmt.Sprintf("::emu::fc_defined(%d)", idx))
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	r.computeDepth()
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if tk.kind != tkIdent {
			continue
		}
		if call, ok := names[tk.text]; ok {
			pv := r.prev(i)
			if pv >= 0 && r.t[pv].kind == tkPunct && (r.t[pv].text == "." || r.t[pv].text == "::" || r.t[pv].text == ">" && pv > 0 && r.t[pv-1].text == "-") {
				continue
			}
			r.t[i].text = call
			continue
		}
		// A namespace-scope constant initialised from a function constant becomes an accessor too.
		if tk.text == "constant" && r.depth[i] == 0 && r.stmtStart(i) == i {
			e := r.findPunct(i, ";")
			eq := r.findPunct(i, "=")
			if e < 0 || eq < 0 || eq > e {
				continue
			}
			for k := eq + 1; k < e; k++ {
				if call, ok := names[r.t[k].text]; ok && r.t[k].kind == tkIdent && !r.is(r.prev(k), tkPunct, ".") {
					r.t[k].text = call
				}
			}
			if init := r.text(eq, e); !strings.Contains(init, "emu_fc_") && !strings.Contains(init, "::emu::fc_defined") {
				continue
			}
			nameAt := r.prev(eq)
			if r.t[nameAt].kind != tkIdent {
				continue
			}
			name := r.t[nameAt].text
			typ := strings.TrimSpace(strings.ReplaceAll(r.text(i+1, nameAt), "constexpr", ""))
			r.replace(i, e+1, fmt.Sprintf("static inline %s emu_fc_%s() { return %s; }", typ, name, strings.TrimSpace(r.text(eq+1, e))))
			names[name] = "emu_fc_" + name + "()"
		}
	}
	return nil
}
