package emu

import (
	"fmt"
	"strings"
)

// kernels finds kernel definitions, records their parameters, strips the MSL-only syntax (kernel
// keyword, attributes) and rewrites their threadgroup variables.
func (r *rewriter) kernels(p *program) ([]*kernelDef, error) {
	var defs []*kernelDef
	for i := 0; i < len(r.t); i++ {
		tk := r.t[i]
		if r.sc.kind[i] != scNamespace {
			continue
		}
		isKernel := tk.kind == tkIdent && tk.text == "kernel"
		if tk.kind == tkAttr {
			for _, a := range parseAttrs(tk.text) {
				if a.name == "kernel" {
					isKernel = true
				}
			}
		}
		if !isKernel {
			continue
		}
		s := r.stmtStart(i)
		if r.is(s, tkIdent, "template") && !r.is(r.next(s), tkPunct, "<") {
			continue // explicit instantiation, handled by instantiations
		}
		d := &kernelDef{maxThreads: "1024"}
		retFrom := s
		if r.is(s, tkIdent, "template") {
			d.template = true
			lt := r.next(s)
			gt := r.match(lt)
			d.thead = strings.Join(strings.Fields(r.text(lt+1, gt)), " ")
			d.tparams = templateArgsOf(r.text(lt+1, gt))
			retFrom = gt + 1
		}
		open := r.findPunct(i, "(")
		if open < 0 {
			return nil, fmt.Errorf("kernel without parameter list")
		}
		nameAt := r.prev(open)
		if r.t[nameAt].kind != tkIdent {
			return nil, fmt.Errorf("cannot find the kernel name before %q", r.text(s, open+1))
		}
		d.name = r.t[nameAt].text
		d.host = d.name
		if d.name == "main" {
			r.errorf(nameAt, "a function cannot be named main (MSL 1.5.4)")
		}
		// Attributes, the kernel keyword and the return type between the statement start and the name.
		var ret []string
		for k := retFrom; k < nameAt; k++ {
			switch {
			case r.t[k].kind == tkIdent && r.t[k].text == "kernel":
				r.setText(k, "")
			case r.t[k].kind == tkAttr:
				for _, a := range parseAttrs(r.t[k].text) {
					switch a.name {
					case "host_name":
						h, ok := stringLiteral(a.arg)
						if !ok {
							r.errorf(k, "host_name(%s): the argument must be a string literal (MSL 5.1.3)", a.arg)
						}
						d.host = h
					case "max_total_threads_per_threadgroup":
						// Evaluated by clang per instance (it may depend on template arguments).
						n, err := evalInt(a.arg)
						if err == nil && (n <= 0 || n > 1024) {
							r.errorf(k, "max_total_threads_per_threadgroup(%s): must be in [1, 1024] (MSL 5.1.3)", a.arg)
						}
						d.maxThreads = a.arg
					}
				}
				r.replace(k, k+1, "")
			case r.t[k].kind == tkIdent || r.t[k].kind == tkPunct:
				switch r.t[k].text {
				case "static", "inline", "extern", "METAL_FUNC", "[[", "]]":
				default:
					ret = append(ret, r.t[k].text)
				}
			}
		}
		if rt := strings.Join(ret, " "); rt != "void" {
			r.errorf(nameAt, "kernel %s returns %q: a kernel function must return void (MSL 5.1.3)", d.name, rt)
		}
		closeAt := r.match(open)
		var err error
		if d.params, err = r.params(p, d, open, closeAt); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", d.name, err)
		}
		body := r.next(closeAt)
		for body < len(r.t) && r.t[body].kind == tkAttr {
			r.replace(body, body+1, "")
			body = r.next(body)
		}
		if r.is(body, tkPunct, ";") {
			continue // declaration only
		}
		if !r.is(body, tkPunct, "{") {
			return nil, fmt.Errorf("kernel %s: expected a body", d.name)
		}
		end := r.match(body)
		if err := r.threadgroupDecls(d, body, end); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", d.name, err)
		}
		defs = append(defs, d)
		i = end
	}
	return defs, nil
}

// templateArgsOf turns a template parameter list into the argument list naming the template's
// own parameters: `typename T, int N = 4, class... R` -> `T, N, R...`.
func templateArgsOf(list string) string {
	var out []string
	for _, part := range splitTop(list, ',') {
		part = strings.TrimSpace(part)
		if eq := topLevelIndex(part, '='); eq >= 0 {
			part = strings.TrimSpace(part[:eq])
		}
		toks := tokenize(part)
		name, pack := "", false
		var sig []token
		for _, t := range toks {
			if t.kind != tkSpace {
				sig = append(sig, t)
			}
		}
		for k, t := range sig {
			if t.kind == tkIdent && name == "" || t.kind == tkIdent && !strings.Contains(part, "(") {
				name = t.text
			}
			// A function pointer or reference parameter, R (*f)(A) or R (&f)(A): the name is f.
			if t.text == "(" && k+3 < len(sig) && (sig[k+1].text == "*" || sig[k+1].text == "&") && sig[k+2].kind == tkIdent && sig[k+3].text == ")" {
				name = sig[k+2].text
				break
			}
			if t.text == "." {
				pack = true
			}
		}
		if !strings.Contains(part, "(") {
			for _, t := range sig {
				if t.kind == tkIdent {
					name = t.text
				}
			}
		}
		if pack {
			name += "..."
		}
		out = append(out, name)
	}
	return strings.Join(out, ", ")
}

// topLevelIndex is the index of c in s outside brackets, or -1.
func topLevelIndex(s string, c byte) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{', '<':
			depth++
		case ')', ']', '}', '>':
			depth--
		case c:
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// params parses the parameter list between the parentheses at open and closeAt. Buffers and
// threadgroup pointers without an index attribute take the index after the previous one, as
// Apple's compiler assigns them.
func (r *rewriter) params(p *program, d *kernelDef, open, closeAt int) ([]param, error) {
	var out []param
	start := open + 1
	depth := 0
	nextBuf, nextTG := 0, 0
	used := map[string]int{}
	for k := open + 1; k <= closeAt; k++ {
		tk := r.t[k]
		if tk.kind == tkPunct {
			switch tk.text {
			case "(", "<", "[", "{":
				depth++
			case ")", ">", "]", "}":
				depth--
			}
		}
		if k == closeAt || depth == 0 && tk.kind == tkPunct && tk.text == "," {
			if strings.TrimSpace(r.text(start, k)) != "" {
				prm, ok, err := r.param(p, d, start, k, &nextBuf, &nextTG)
				if err != nil {
					return nil, err
				}
				if ok {
					if prm.kind != pBuiltin {
						key := fmt.Sprintf("%d/%d", prm.kind, prm.index)
						if prev, dup := used[key]; dup {
							r.errorf(start, "kernel %s: parameters %s and %s share index %d (MSL 5.2.1)", d.name, out[prev].name, prm.name, prm.index)
						}
						used[key] = len(out)
					}
					out = append(out, prm)
				}
			}
			start = k + 1
		}
	}
	return out, nil
}

var addressSpaces = map[string]bool{"device": true, "constant": true, "threadgroup": true, "thread": true,
	"threadgroup_imageblock": true, "ray_data": true, "object_data": true}

// param reads one kernel parameter; ok is false for a parameter the rule checks rejected.
func (r *rewriter) param(p *program, d *kernelDef, i, j int, nextBuf, nextTG *int) (param, bool, error) {
	prm := param{fcSlot: -1}
	if r.t[i].kind == tkSpace || r.t[i].text == "" {
		i = r.next(i)
	}
	var at []attr
	nameAt := -1
	space := ""
	indirect := false
	dims := false // an array parameter, a pointer in C++
	for k := i; k < j; k++ {
		switch r.t[k].kind {
		case tkAttr:
			at = append(at, parseAttrs(r.t[k].text)...)
			r.replace(k, k+1, "")
		case tkIdent:
			if addressSpaces[r.t[k].text] && space == "" {
				space = r.t[k].text
			}
			if !dims {
				nameAt = k
			}
		case tkPunct:
			if r.t[k].text == "*" || r.t[k].text == "&" {
				indirect = true
			}
			if r.t[k].text == "[" {
				indirect, dims = true, true
			}
		}
	}
	if nameAt < 0 {
		r.errorf(i, "kernel %s: every parameter needs a name (MSL 5.2.1)", d.name)
		return prm, false, nil
	}
	prm.name = r.t[nameAt].text
	prm.typ = strings.TrimSpace(r.text(i, nameAt))
	for k := i; k < nameAt; k++ {
		if r.is(k, tkIdent, "tensor") {
			return prm, false, fmt.Errorf("parameter %s: tensor arguments (MTLTensor bindings) are not emulated; bind a buffer and build the tensor in the kernel", prm.name)
		}
	}
	var index *attr
	for a := range at {
		switch at[a].name {
		case "function_constant":
			prm.fcSlot = fcSlot(p, at[a].arg)
			if prm.fcSlot < 0 {
				r.errorf(i, "kernel %s: parameter %s: [[function_constant(%s)]] names no function constant (MSL 5.8.1)", d.name, prm.name, at[a].arg)
			}
		default:
			if index == nil {
				index = &at[a]
			}
		}
	}
	switch {
	case index == nil && indirect:
		switch space {
		case "device", "constant":
			prm.kind, prm.index = pBuffer, *nextBuf
			*nextBuf++
		case "threadgroup":
			prm.kind, prm.index = pThreadgroup, *nextTG
			*nextTG++
		default:
			r.errorf(i, "kernel %s: pointer or reference parameter %s must be declared in the device, constant or threadgroup address space (MSL 5.2.1)", d.name, prm.name)
			return prm, false, nil
		}
	case index == nil:
		r.errorf(i, "kernel %s: parameter %s needs an attribute: [[buffer(n)]] for data, or a position attribute (MSL 5.2.1)", d.name, prm.name)
		return prm, false, nil
	case index.name == "buffer" || index.name == "threadgroup":
		n, err := evalInt(index.arg)
		if err != nil || n < 0 || n >= maxBindings {
			r.errorf(i, "kernel %s: parameter %s: [[%s(%s)]]: the index must be an integer constant in [0, %d] (MSL 5.2.1)", d.name, prm.name, index.name, index.arg, maxBindings-1)
			return prm, false, nil
		}
		prm.index = int(n)
		if index.name == "buffer" {
			prm.kind = pBuffer
			*nextBuf = prm.index + 1
			if !indirect || space != "device" && space != "constant" {
				r.errorf(i, "kernel %s: [[buffer(%d)]] parameter %s must be a pointer or reference in the device or constant address space (MSL 5.2.1)", d.name, prm.index, prm.name)
			}
		} else {
			prm.kind = pThreadgroup
			*nextTG = prm.index + 1
			if !indirect || space != "threadgroup" {
				r.errorf(i, "kernel %s: [[threadgroup(%d)]] parameter %s must be a pointer or reference in the threadgroup address space (MSL 5.2.1)", d.name, prm.index, prm.name)
			}
		}
	case builtinExpr[index.name] != "":
		prm.kind, prm.builtin = pBuiltin, index.name
		if !builtinTypeOK(prm.typ, builtinVector[index.name]) {
			want := "uint or ushort"
			if builtinVector[index.name] {
				want = "uint, ushort, uint2, ushort2, uint3 or ushort3"
			}
			r.errorf(i, "kernel %s: parameter %s: [[%s]] must be of type %s, not %s (MSL 5.2.3.6)", d.name, prm.name, index.name, want, prm.typ)
		}
	default:
		return prm, false, fmt.Errorf("parameter %s: unsupported attribute [[%s]]", prm.name, index.name)
	}
	return prm, true, nil
}

func builtinTypeOK(typ string, vector bool) bool {
	f := strings.Fields(strings.NewReplacer("metal::", " ", "const", " ", "thread", " ").Replace(typ))
	if len(f) != 1 {
		return len(f) == 2 && (f[0] == "unsigned" && (f[1] == "int" || f[1] == "short"))
	}
	switch f[0] {
	case "uint", "ushort", "uint32_t", "uint16_t":
		return true
	case "uint2", "uint3", "ushort2", "ushort3":
		return vector
	}
	return false
}

// threadgroupDecls rewrites `threadgroup T name[dims];` in the kernel body [open, end] into
// references to the kernel instance's threadgroup variables (static records the runtime lays out).
func (r *rewriter) threadgroupDecls(d *kernelDef, open, end int) error {
	ref := kernelRef(d, d.tparams)
	v := 0
	for k := open + 1; k < end; k++ {
		if !r.is(k, tkIdent, "threadgroup") {
			continue
		}
		pv := r.prev(k)
		if !(r.boundary(pv) || r.is(pv, tkPunct, ":")) {
			continue
		}
		e := r.findPunct(k, ";")
		stmt := r.text(k+1, e)
		head := stmt
		if b := strings.IndexByte(head, '['); b >= 0 {
			head = head[:b]
		}
		if strings.ContainsAny(head, "*&(") || strings.Contains(head, "=") {
			continue // a pointer or reference into threadgroup memory
		}
		var repl []string
		firstType := ""
		for _, decl := range splitTop(stmt, ',') {
			// An initializer is an error (check); with -lax, a warning and ignored.
			if eq := topLevelIndex(decl, '='); eq >= 0 {
				decl = decl[:eq]
			}
			decl = strings.TrimSpace(decl)
			base := decl
			dims := ""
			if b := strings.IndexByte(decl, '['); b >= 0 {
				base, dims = strings.TrimSpace(decl[:b]), decl[b:]
			}
			sp := strings.LastIndexAny(base, " \t\n")
			name, typ := "", ""
			if sp < 0 {
				if firstType == "" {
					return fmt.Errorf("cannot parse threadgroup declaration %q", decl)
				}
				name, typ = base, firstType // `threadgroup T a[4], b[8];`: later names reuse the first type
			} else {
				name, typ = strings.TrimSpace(base[sp:]), strings.TrimSpace(base[:sp])
			}
			if firstType == "" {
				firstType = typ
			}
			repl = append(repl, fmt.Sprintf("auto& %s = ::emu::tg_var<%s, %d, %s%s>::ref();", name, ref, v,
				strings.Join(strings.Fields(typ), " "), strings.Join(strings.Fields(dims), "")))
			v++
		}
		r.replace(k, e+1, strings.Join(repl, " "))
		k = e
	}
	return nil
}

// instantiations reads `template [[host_name("x")]] [[kernel]] decltype(f<A>) f<A>;`, the
// `void f<A>(...)` form and the `void f(...)` form whose arguments clang deduces, records the
// instance and deletes the statement. Kernel templates may be overloaded (one name, several
// template parameter lists): the instance goes to the one its arguments fit.
func (r *rewriter) instantiations(defs []*kernelDef) ([]kernelInst, error) {
	byName := map[string][]*kernelDef{}
	for _, d := range defs {
		if d.template {
			byName[d.name] = append(byName[d.name], d)
		}
	}
	var out []kernelInst
	for i := 0; i < len(r.t); i++ {
		if !r.is(i, tkIdent, "template") || r.sc.kind[i] != scNamespace || r.is(r.next(i), tkPunct, "<") {
			continue
		}
		e := r.findPunct(i, ";")
		if e < 0 {
			break
		}
		host := ""
		hostAt := i
		isKernel := false
		nameAt := -1
		for k := i + 1; k < e; k++ {
			switch r.t[k].kind {
			case tkAttr:
				for _, a := range parseAttrs(r.t[k].text) {
					if a.name == "host_name" {
						h, ok := stringLiteral(a.arg)
						if !ok {
							r.errorf(k, "host_name(%s): the argument must be a string literal (MSL 5.1.3)", a.arg)
						}
						host, hostAt = h, k
					}
					if a.name == "kernel" {
						isKernel = true
					}
				}
			case tkIdent:
				nx := r.next(k)
				if _, ok := byName[r.t[k].text]; ok && nameAt < 0 && (r.is(nx, tkPunct, "<") || r.is(nx, tkPunct, "(")) &&
					!r.is(r.prev(k), tkPunct, "(") {
					nameAt = k
				}
				if r.t[k].text == "kernel" {
					isKernel = true
				}
			}
		}
		if nameAt < 0 {
			if isKernel || host != "" {
				r.errorf(hostAt, "instantiation %q names no template kernel of this file", strings.Join(strings.Fields(r.text(i, e+1)), " "))
			}
			continue
		}
		inst := kernelInst{}
		name := r.t[nameAt].text
		nx := r.next(nameAt)
		cands := byName[name]
		if r.is(nx, tkPunct, "<") {
			gt := r.match(nx)
			inst.targs = strings.Join(strings.Fields(r.text(nx+1, gt)), " ")
			inst.def = pickTemplate(cands, inst.targs)
		} else {
			// void f(T1 a [[buffer(0)]], ...): the parameter types select the instance.
			cl := r.match(nx)
			var types []string
			for _, part := range splitTop(r.text(nx+1, cl), ',') {
				toks := tokenize(part)
				last := -1
				for k, t := range toks {
					if t.kind == tkIdent {
						last = k
					}
				}
				var b strings.Builder
				for k, t := range toks {
					if t.kind == tkAttr || k == last && last > 0 {
						continue
					}
					b.WriteString(t.text)
				}
				types = append(types, strings.Join(strings.Fields(b.String()), " "))
			}
			inst.def = cands[0]
			if len(cands) > 1 {
				r.errorf(nameAt, "instantiation of the overloaded kernel template %s must name its template arguments", name)
			}
			targs, err := deduceTemplateArgs(inst.def, types)
			if err != nil {
				r.errorf(nameAt, "instantiation of kernel template %s: %v", name, err)
				continue
			}
			inst.targs = targs
		}
		if host == "" {
			host = name
		}
		inst.host = host
		out = append(out, inst)
		r.replace(i, e+1, "")
		i = e
	}
	return out, nil
}

// pickTemplate chooses among overloaded kernel templates the one whose parameter list takes the
// arguments: as many (defaults and packs counted), literals for value parameters.
func pickTemplate(cands []*kernelDef, targs string) *kernelDef {
	args := splitTop(targs, ',')
	best := cands[0]
	for _, d := range cands {
		params := splitTop(d.thead, ',')
		ok := true
		need, pack := 0, false
		for k, p := range params {
			p = strings.TrimSpace(p)
			if strings.Contains(p, "...") {
				pack = true
				continue
			}
			if topLevelIndex(p, '=') < 0 {
				need++
			}
			if k < len(args) {
				a := strings.TrimSpace(args[k])
				isType := strings.HasPrefix(p, "typename") || strings.HasPrefix(p, "class")
				literal := a == "true" || a == "false" || a != "" && (isDigit(a[0]) || a[0] == '-')
				if isType && literal {
					ok = false
				}
			}
		}
		if len(args) < need || len(args) > len(params) && !pack {
			ok = false
		}
		if ok {
			return d
		}
	}
	return best
}

// deduceTemplateArgs finds the template arguments of an explicit instantiation that names only the
// parameter types, void f(const device float* x, constant P<2>* p): it matches each parameter type
// of the template (T, P<N>) against the instance's, token by token.
func deduceTemplateArgs(d *kernelDef, types []string) (string, error) {
	if len(types) != len(d.params) {
		return "", fmt.Errorf("%d parameters, the template has %d", len(types), len(d.params))
	}
	names := splitTop(d.tparams, ',')
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	isParam := map[string]bool{}
	for _, n := range names {
		isParam[n] = true
	}
	got := map[string]string{}
	words := func(s string) []string {
		var out []string
		for _, t := range tokenize(s) {
			if t.kind != tkSpace {
				out = append(out, t.text)
			}
		}
		return out
	}
	for k, p := range d.params {
		dt, it := words(p.typ), words(types[k])
		i, j := 0, 0
		for i < len(dt) {
			if isParam[dt[i]] {
				// The argument runs to the template's next token (at bracket depth 0).
				stop := ""
				if i+1 < len(dt) {
					stop = dt[i+1]
				}
				start, depth := j, 0
				for j < len(it) && !(depth == 0 && stop != "" && it[j] == stop) {
					switch it[j] {
					case "<", "(", "[":
						depth++
					case ">", ")", "]":
						depth--
					}
					j++
				}
				arg := strings.Join(it[start:j], " ")
				if prev, ok := got[dt[i]]; ok && prev != arg {
					return "", fmt.Errorf("template parameter %s deduced as both %s and %s", dt[i], prev, arg)
				}
				got[dt[i]] = arg
				i++
				continue
			}
			if j >= len(it) || it[j] != dt[i] {
				return "", fmt.Errorf("parameter %d: type %q does not match %q", k+1, types[k], p.typ)
			}
			i++
			j++
		}
	}
	var args []string
	for _, n := range names {
		a, ok := got[n]
		if !ok {
			break // the rest take their defaults
		}
		args = append(args, a)
	}
	if len(args) < len(names) {
		for _, n := range names[len(args):] {
			if _, ok := got[n]; ok {
				return "", fmt.Errorf("template parameter %s not deduced", names[len(args)])
			}
		}
	}
	return strings.Join(args, ", "), nil
}
