package emu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The pre-pass turns preprocessed MSL into C++ for OpenCL that clang compiles against the stand-in
// headers. It checks the MSL rules clang cannot (check.go), rewrites what clang would take
// differently (vector constructors and vector casts, kernel-scope threadgroup variables, host_name
// instantiations, function constants, unqualified pointers, matmul2d descriptors), reads the
// kernel attributes and emits one launcher per kernel. The output keeps every token at the line
// and, where it can, the column it had in the source, so that clang's diagnostics cite the source.

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
	fcSlot    int    // slot of the function constant guarding the argument, or -1
}

type kernelDef struct {
	name, host string
	template   bool
	thead      string // the template parameter list
	tparams    string // the template's own arguments, `T, N, Rest...`
	params     []param
	maxThreads string // [[max_total_threads_per_threadgroup(expr)]], a constant expression
}

// kernelInst is one callable kernel: a plain kernel, or a template kernel instantiated under a host name.
type kernelInst struct {
	host  string
	def   *kernelDef
	targs string
}

// funcConst is a function constant: the index the host names it by and the slot the library
// passes it in.
type funcConst struct {
	name, typ string
	index     int
	slot      int
}

type program struct {
	cpp string
	// tensor reports that the source includes <metal_tensor> or MetalPerformancePrimitives.
	tensor    bool
	kernels   []kernelInst
	constants []funcConst
	// diags are the MSL rule violations found; the program is not compiled when one is an error.
	diags []Diagnostic
	// lines maps (file, line) of the source to the output columns of its tokens, for diagnostics.
	lines map[lineKey][]segment
}

type rewriter struct {
	t      []token
	depth  []int // brace depth before each token
	pdepth []int // parenthesis and bracket depth before each token
	sc     *scopes
	diags  []Diagnostic
	// vecAliases are typedef or using names of vector types (casts to them convert).
	vecAliases map[string]bool
	// fnAliases are the alias templates of function pointer types.
	fnAliases map[string]fnAlias
}

func (r *rewriter) next(i int) int {
	for i++; i < len(r.t) && (r.t[i].kind == tkSpace || r.t[i].text == "" && r.t[i].kind != tkDirective); i++ {
	}
	return i
}

func (r *rewriter) prev(i int) int {
	for i--; i >= 0 && (r.t[i].kind == tkSpace || r.t[i].text == ""); i-- {
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
			if open == "<" && r.is(j-1, tkPunct, "-") {
				continue
			}
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
	for k := i; k < j && k < len(r.t); k++ {
		b.WriteString(r.t[k].text)
	}
	return b.String()
}

// replace sets tokens [i, j) to text, placed where token i was.
func (r *rewriter) replace(i, j int, text string) {
	p := r.t[i].pos
	end, ecol, eend := 0, r.t[i].ecol, 0
	for k := i; k < j; k++ {
		if r.t[k].kind != tkSpace && r.t[k].text != "" && r.t[k].pos.line == p.line && r.t[k].pos.file == p.file {
			end, eend = r.t[k].end, r.t[k].eend
		}
		r.t[k] = token{kind: tkSpace, text: "", pos: r.t[k].pos}
	}
	r.t[i] = token{kind: tkIdent, text: text, pos: p, end: end, ecol: ecol, eend: eend}
}

// setText rewrites the text of token i.
func (r *rewriter) setText(i int, text string) {
	r.t[i].text = text
	r.t[i].orig = false
}

func (r *rewriter) computeDepth() {
	r.depth = make([]int, len(r.t))
	r.pdepth = make([]int, len(r.t))
	d, pd := 0, 0
	for i, tk := range r.t {
		r.depth[i], r.pdepth[i] = d, pd
		if tk.kind == tkPunct {
			switch tk.text {
			case "{":
				d++
			case "}":
				d--
			case "(", "[":
				pd++
			case ")", "]":
				pd--
			}
		}
	}
}

// stmtStart returns the first token of the statement containing i.
func (r *rewriter) stmtStart(i int) int {
	for j := i - 1; j >= 0; j-- {
		tk := r.t[j]
		if tk.kind == tkDirective || tk.kind == tkPunct && (tk.text == ";" || tk.text == "{" || tk.text == "}") ||
			!tk.orig && (strings.HasSuffix(tk.text, ";") || strings.HasSuffix(tk.text, "}")) {
			return r.next(j)
		}
	}
	return r.next(-1)
}

// boundary reports whether token i ends a statement or opens a block: ';', '{', '}', a directive,
// or a rewritten statement.
func (r *rewriter) boundary(i int) bool {
	if i < 0 {
		return true
	}
	tk := r.t[i]
	return tk.kind == tkDirective || tk.kind == tkPunct && (tk.text == ";" || tk.text == "{" || tk.text == "}") ||
		!tk.orig && tk.kind != tkSpace && (strings.HasSuffix(tk.text, ";") || strings.HasSuffix(tk.text, "}"))
}

func (r *rewriter) findPunct(i int, text string) int {
	for ; i < len(r.t); i++ {
		if r.t[i].kind == tkPunct && r.t[i].text == text {
			return i
		}
	}
	return -1
}

// errorf records an MSL rule violation at token i.
func (r *rewriter) errorf(i int, format string, args ...any) {
	r.diags = append(r.diags, diagAt(r.t[i].pos, "error", fmt.Sprintf(format, args...)))
}

func prepass(src string) (*program, error) { return prepassTokens(tokenize(src), usesTensors(src)) }

// usesTensors reports whether preprocessed source included <metal_tensor> or
// MetalPerformancePrimitives (the linemarkers of the stub headers name them).
func usesTensors(pre string) bool {
	return strings.Contains(pre, "stub/metal_tensor\"") || strings.Contains(pre, "stub/MetalPerformancePrimitives/")
}

func prepassTokens(toks []token, tensor bool) (*program, error) {
	r := &rewriter{t: toks, vecAliases: map[string]bool{}}
	r.computeDepth()
	r.computeScopes()
	p := &program{}
	r.check()
	r.openclNames()
	r.floatLiterals()
	r.deducibleVecs()
	r.functionPointerParams()
	r.methodQualifiers()
	r.staticMemberDefinitions()
	r.threadReferences()
	r.constantClassVariables()
	if err := r.functionConstants(p); err != nil {
		return nil, err
	}
	r.computeDepth()
	r.computeScopes()
	defs, err := r.kernels(p)
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
	r.vectorInits()
	r.threadPointers()
	r.localTypeParams()
	r.conditionals()
	r.vecForwarders()
	if tensor {
		r.matmulDescriptors()
	}
	p.diags = r.diags
	p.tensor = tensor
	var b strings.Builder
	b.WriteString("#include \"emu_prelude.h\"\n")
	if p.tensor {
		b.WriteString("#include \"emu_tensor.h\"\n")
	}
	body, lines := r.emit()
	p.lines = lines
	b.WriteString(body)
	b.WriteString("\n#line 1 \"" + launcherFile + "\"\n")
	seen := map[string]bool{}
	for k, inst := range p.kernels {
		if seen[inst.host] {
			return nil, fmt.Errorf("kernel name %q defined twice", inst.host)
		}
		seen[inst.host] = true
		b.WriteString(launcher(k, inst))
	}
	// The thread limit of a template kernel may depend on its arguments.
	for k, d := range defsOf(p.kernels) {
		if d.template {
			fmt.Fprintf(&b, "template <%s> constexpr unsigned emu_mt_%d() { return (%s); }\n", d.thead, k, d.maxThreads)
		}
	}
	b.WriteString("extern \"C\" const emu_kernel emu_kernels[] = {\n")
	defIndex := map[*kernelDef]int{}
	for k, d := range defsOf(p.kernels) {
		defIndex[d] = k
	}
	for k, inst := range p.kernels {
		mt := "(" + inst.def.maxThreads + ")"
		if inst.def.template {
			mt = fmt.Sprintf("emu_mt_%d<%s>()", defIndex[inst.def], inst.targs)
		}
		fmt.Fprintf(&b, "  {%q, emu_entry_%d, (uint32_t)%s, &::emu::kanchor<%s>::a},\n", inst.host, k, mt, instRef(inst))
	}
	if len(p.kernels) == 0 {
		b.WriteString("  {\"\", nullptr, 0, nullptr},\n")
	}
	fmt.Fprintf(&b, "};\nextern \"C\" const int emu_nkernels = %d;\n", len(p.kernels))
	p.cpp = b.String()
	return p, nil
}

// defsOf lists the distinct definitions of the kernels, in order.
func defsOf(ks []kernelInst) []*kernelDef {
	var out []*kernelDef
	seen := map[*kernelDef]bool{}
	for _, k := range ks {
		if !seen[k.def] {
			seen[k.def] = true
			out = append(out, k.def)
		}
	}
	return out
}

// instRef is the address of a kernel instance.
func instRef(inst kernelInst) string { return kernelRef(inst.def, inst.targs) }

// kernelRef is the address of a kernel instance: &f or &f<A...>.
func kernelRef(d *kernelDef, targs string) string {
	if d.template {
		return "&" + d.name + "<" + targs + ">"
	}
	return "&" + d.name
}

func launcher(k int, inst kernelInst) string {
	var args []string
	for _, prm := range inst.def.params {
		switch {
		case prm.kind == pBuffer && prm.fcSlot >= 0:
			args = append(args, fmt.Sprintf("::emu::buffer_if(%d, %d)", prm.index, prm.fcSlot))
		case prm.kind == pBuffer:
			args = append(args, fmt.Sprintf("::emu::buffer(%d)", prm.index))
		case prm.kind == pThreadgroup && prm.fcSlot >= 0:
			args = append(args, fmt.Sprintf("::emu::tg_dynamic_if(%d, %d)", prm.index, prm.fcSlot))
		case prm.kind == pThreadgroup:
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

// lineKey is a source line; segment maps a run of output columns on it back to source columns.
type lineKey struct {
	file string
	line int
}

type segment struct {
	outCol, col, n int
	exact          bool // the output text is the source text: columns inside map one to one
}

// emit writes the tokens out at their source lines (with #line markers where the output would
// otherwise drift) and, where earlier rewrites on the line leave room, at their source columns.
// It returns the text and the column map.
func (r *rewriter) emit() (string, map[lineKey][]segment) {
	var b strings.Builder
	lines := map[lineKey][]segment{}
	curFile, curLine, curCol := "", 0, 1
	started := false
	var prev *token
	prevEnd := 0
	for i := range r.t {
		t := &r.t[i]
		if t.kind == tkSpace || t.text == "" && t.pre == "" && t.post == "" {
			continue
		}
		if t.kind == tkDirective && isUnrollPragma(t.text) {
			continue // a loop hint whose argument the preprocessor leaves unexpanded
		}
		if t.kind == tkDirective {
			// A #pragma takes a line of its own; a #line marker resynchronises after it.
			if started || curCol > 1 {
				b.WriteByte('\n')
			}
			b.WriteString(t.text)
			b.WriteByte('\n')
			started, curCol, prev = false, 1, nil
			continue
		}
		p := t.pos
		if !p.valid() {
			b.WriteByte(' ')
			b.WriteString(t.text)
			curCol += 1 + len(t.text)
			prev = nil
			continue
		}
		if !started || p.file != curFile || p.line < curLine || p.line > curLine+8 {
			if started || curCol > 1 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "#line %d %s\n", p.line, strconv.Quote(p.file))
			curFile, curLine, curCol = p.file, p.line, 1
			started = true
			prev = nil
		}
		for curLine < p.line {
			b.WriteByte('\n')
			curLine++
			curCol = 1
			prev = nil
		}
		adjacent := prev != nil && prev.pos.line == p.line && prev.pos.file == p.file &&
			(p.col == prevEnd && prevEnd > 0 || t.ecol == prev.eend && t.ecol > 0)
		switch {
		case adjacent:
		case curCol < p.col:
			b.WriteString(strings.Repeat(" ", p.col-curCol))
			curCol = p.col
		case curCol > 1:
			b.WriteByte(' ')
			curCol++
		}
		key := lineKey{p.file, p.line}
		text := t.pre + t.text + t.post
		lines[key] = append(lines[key], segment{outCol: curCol + len(t.pre), col: p.col, n: len(t.text), exact: t.orig})
		b.WriteString(text)
		if nl := strings.Count(text, "\n"); nl > 0 {
			curLine += nl
			curCol = len(text) - strings.LastIndexByte(text, '\n')
		} else {
			curCol += len(text)
		}
		prev = t
		prevEnd = t.end
	}
	for k := range lines {
		sort.SliceStable(lines[k], func(a, b int) bool { return lines[k][a].outCol < lines[k][b].outCol })
	}
	return b.String(), lines
}

// isUnrollPragma reports `#pragma unroll (N)` and `#pragma nounroll`: optimisation hints, whose
// arguments clang -E leaves unexpanded (MIN(...) would then be undeclared).
func isUnrollPragma(d string) bool {
	f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(d), "#"))
	return len(f) >= 2 && f[0] == "pragma" && (f[1] == "unroll" || strings.HasPrefix(f[1], "unroll(") || f[1] == "nounroll")
}

// sourceCol maps a column clang reports on a source line of the output back to the source.
func sourceCol(segs []segment, col int) int {
	best := -1
	for i, s := range segs {
		if s.outCol <= col {
			best = i
		}
	}
	if best < 0 {
		return col
	}
	s := segs[best]
	if s.exact && col < s.outCol+s.n {
		return s.col + col - s.outCol
	}
	return s.col
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
	"thread_index_in_quadgroup":           "::emu::pos1(i->tiitg % 4)",
	"quadgroup_index_in_threadgroup":      "::emu::pos1(i->tiitg / 4)",
	"quadgroups_per_threadgroup":          "::emu::pos1((i->tptg[0] * i->tptg[1] * i->tptg[2] + 3) / 4)",
	"dispatch_quadgroups_per_threadgroup": "::emu::pos1((i->tptg[0] * i->tptg[1] * i->tptg[2] + 3) / 4)",
}

// vector builtins take uint/ushort scalars or 2- and 3-element vectors; index builtins scalars.
var builtinVector = map[string]bool{
	"thread_position_in_grid": true, "thread_position_in_threadgroup": true, "threadgroup_position_in_grid": true,
	"threads_per_threadgroup": true, "dispatch_threads_per_threadgroup": true, "threadgroups_per_grid": true,
	"threads_per_grid": true,
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

// functionConstants rewrites `constant T name [[function_constant(n)]];` and namespace-scope
// constants initialised from them into accessors read at run time. The index n may be any
// integer constant expression in [0, 65535]; the library passes constants in slots of its own.
func (r *rewriter) functionConstants(p *program) error {
	names := map[string]string{} // name -> accessor call
	for a := range r.t {
		if r.t[a].kind != tkAttr || !strings.Contains(r.t[a].text, "function_constant") {
			continue
		}
		at := parseAttrs(r.t[a].text)
		if len(at) != 1 || at[0].name != "function_constant" {
			continue // a kernel parameter guarded by a constant: see kernels
		}
		if r.sc.kind[a] != scNamespace {
			continue
		}
		idx64, err := evalInt(at[0].arg)
		idx := int(idx64)
		if err != nil || idx64 < 0 || idx64 > 65535 {
			r.errorf(a, "function_constant(%s): the index must be an integer constant expression in [0, 65535] (MSL 5.8.1)", at[0].arg)
			continue
		}
		s, e := r.stmtStart(a), r.findPunct(a, ";")
		nameAt := r.prev(a)
		if e < 0 || nameAt < s || r.t[nameAt].kind != tkIdent {
			return fmt.Errorf("cannot parse function constant declaration %q", r.text(s, a+1))
		}
		var tf []string
		for _, f := range strings.Fields(r.text(s, nameAt)) {
			switch f {
			case "constant", "static", "constexpr", "inline", "const":
			default:
				tf = append(tf, f)
			}
		}
		typ := strings.Join(tf, " ")
		name := r.t[nameAt].text
		for _, c := range p.constants {
			if c.index == idx {
				r.errorf(a, "function constant %s reuses index %d of %s (MSL 5.8.1: indices are unique)", name, idx, c.name)
			}
		}
		if len(p.constants) >= maxConstants {
			return fmt.Errorf("more than %d function constants", maxConstants)
		}
		slot := len(p.constants)
		p.constants = append(p.constants, funcConst{name: name, typ: typ, index: idx, slot: slot})
		r.replace(s, e+1, fmt.Sprintf("static inline %s emu_fc_%s() { return ::emu::fc<%s>(%d); }", typ, name, typ, slot))
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
				r.replace(i, c+1, fmt.Sprintf("::emu::fc_defined(%d)", slot))
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	r.computeDepth()
	// shadow[name] is the brace depth of a local variable or parameter named like a constant,
	// which hides the constant until its scope closes.
	shadow := map[string]int{}
	depth := 0
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if tk.kind == tkPunct && tk.text == "{" {
			depth++
		}
		if tk.kind == tkPunct && tk.text == "}" {
			depth--
			for n, d := range shadow {
				if depth < d {
					delete(shadow, n)
				}
			}
		}
		if tk.kind == tkAttr && strings.Contains(tk.text, "function_constant") {
			continue // the guard of a kernel parameter names the constant itself
		}
		if tk.kind != tkIdent {
			continue
		}
		if call, ok := names[tk.text]; ok {
			pv := r.prev(i)
			if pv >= 0 && r.t[pv].kind == tkPunct && (r.t[pv].text == "." || r.t[pv].text == "::" || r.t[pv].text == ">" && pv > 0 && r.t[pv-1].text == "-") {
				continue
			}
			if _, hidden := shadow[tk.text]; hidden {
				continue
			}
			if r.sc.kind[i] != scNamespace && r.declares(i) {
				d := depth
				if r.pdepth[i] > 0 {
					d = depth + 1 // a parameter: the function's body
				}
				shadow[tk.text] = d
				continue
			}
			r.setText(i, call)
			continue
		}
		// A namespace-scope constant initialised from a function constant becomes an accessor too.
		if tk.text == "constant" && r.sc.kind[i] == scNamespace && r.stmtStart(i) == i {
			e := r.findPunct(i, ";")
			eq := r.findPunct(i, "=")
			if e < 0 || eq < 0 || eq > e {
				continue
			}
			for k := eq + 1; k < e; k++ {
				if call, ok := names[r.t[k].text]; ok && r.t[k].kind == tkIdent && !r.is(r.prev(k), tkPunct, ".") {
					r.setText(k, call)
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
			typ = strings.TrimSpace(strings.ReplaceAll(" "+typ+" ", " static ", " "))
			r.replace(i, e+1, fmt.Sprintf("static inline %s emu_fc_%s() { return %s; }", typ, name, strings.TrimSpace(r.text(eq+1, e))))
			names[name] = "emu_fc_" + name + "()"
		}
	}
	return nil
}

// declares reports whether identifier i is the name in a declaration of a variable or parameter
// (a type name before it, and `=`, `;`, `,`, `[`, `{`, `)` or `:` after it).
func (r *rewriter) declares(i int) bool {
	pv := r.prev(i)
	if pv < 0 {
		return false
	}
	switch {
	case r.t[pv].kind == tkIdent:
		switch r.t[pv].text {
		case "return", "case", "else", "do", "sizeof", "new", "delete", "throw", "goto", "co_return", "typename":
			return false
		}
	default:
		return false
	}
	nx := r.next(i)
	if nx >= len(r.t) || r.t[nx].kind != tkPunct {
		return false
	}
	switch r.t[nx].text {
	case "=", ";", ",", "[", "{", ")", ":":
		return true
	}
	return false
}

// fcSlot returns the slot of the function constant a kernel parameter's
// [[function_constant(name)]] names, or -1.
func fcSlot(p *program, name string) int {
	for _, c := range p.constants {
		if c.name == name {
			return c.slot
		}
	}
	return -1
}
