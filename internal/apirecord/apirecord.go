// Package apirecord writes down the exported API of a module, one line per
// identifier, method, struct field and interface method, in the manner of
// the Go project's api/go1.*.txt, and checks a module against such a record.
// Every module of the repository has a test, TestAPIMatchesRecord, that calls
// [Check], so that an exported signature cannot change without the record
// changing in the same commit.
//
// The lines read, for example:
//
//	pkg github.com/retrykit/backoff, func Retry(context.Context, Schedule, func(context.Context) error, ...Option) error
//	pkg github.com/retrykit/backoff, method (*Limiter) Allow() bool
//	pkg github.com/retrykit/backoff, type Schedule struct, Duration time.Duration
//	pkg github.com/retrykit/backoff, const DefaultInitialLimit = 20
//	pkg github.com/retrykit/backoff, type Queue[$0 comparable] struct
//
// Types of the package itself are unqualified, others are qualified by
// their package's name. Type parameters are numbered ($0, $1...), as cmd/api
// numbers them, so that renaming one is no change. The empty interface is
// written any, whichever Go wrote the types, and aliases are resolved, so
// that every supported Go release writes the same record.
//
// The packages are read from the export data that `go list -export` gives
// (the compiler's own, so a package is read exactly as its importers see
// it), with the standard library's go/importer: the package needs nothing
// outside the standard library, works under -race and with every Go release
// the modules support, and takes a second or two on a warm build cache.
package apirecord

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/constant"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// UpdateCommand is the command, run in a module's directory, that rewrites
// the module's record from its code.
const UpdateCommand = "go test -run TestAPIMatchesRecord -update-api ."

// updateEnv, set to a non-empty value, rewrites the record as the flag
// does, for a loop over every module (a flag that a package's test binary
// does not define would fail the others).
const updateEnv = "BACKOFF_UPDATE_API"

var update = flag.Bool("update-api", false, "rewrite the API record (api/*.txt) from the code instead of checking it")

// Check fails t when the exported API of the module in the current directory
// (the directory of the test that calls it) differs from the record in the
// file record, printing the lines added and removed and the command that
// updates the record. With the flag -update-api, or the environment variable
// BACKOFF_UPDATE_API=1, it rewrites the record instead.
func Check(t testing.TB, record string) {
	t.Helper()
	mod, err := LoadModule(".")
	if err != nil {
		t.Fatalf("apirecord: %v", err)
	}
	got := mod.Lines()
	if *update || os.Getenv(updateEnv) != "" {
		if err := os.MkdirAll(filepath.Dir(record), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(record, []byte(mod.Record()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d lines", record, len(got))
		return
	}
	data, err := os.ReadFile(record)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	added, removed := Diff(ParseRecord(string(data)), got)
	if len(added) == 0 && len(removed) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the exported API of module %s differs from its record, %s:\n", mod.Path, record)
	for _, l := range added {
		fmt.Fprintf(&b, "+ %s\n", l)
	}
	for _, l := range removed {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "If the change is meant, record it in the same commit, with a CHANGELOG line that says whether it breaks callers\n")
	fmt.Fprintf(&b, "(a removed or changed line does). To rewrite the record, in %s:\n\n\t%s\n", mod.Dir, UpdateCommand)
	t.Error(b.String())
}

// Module is the exported API of a module: its packages, but for commands
// (package main), internal packages and the packages under examples/.
type Module struct {
	Path     string           // the module path
	Dir      string           // the module's directory
	Packages []*types.Package // by import path
}

// LoadModule reads the packages of the module that holds dir, through `go
// list` run in dir.
func LoadModule(dir string) (*Module, error) {
	out, err := goList(dir, "-f", "{{.ImportPath}}\t{{.Name}}\t{{with .Module}}{{.Path}}\t{{.Dir}}{{end}}", "./...")
	if err != nil {
		return nil, err
	}
	m := &Module{}
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("go list: unexpected line %q", line)
		}
		m.Path, m.Dir = f[2], f[3]
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], f[2]), "/")
		if f[1] == "main" || hasSegment(rel, "internal") || hasSegment(rel, "examples") {
			continue
		}
		paths = append(paths, f[0])
	}
	if len(paths) == 0 {
		return m, nil
	}
	// One go list for the export data of the packages and of everything
	// they import: the importer asks for the dependencies as it reads.
	out, err = goList(dir, append([]string{"-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}, paths...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if path, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	sort.Strings(paths)
	for _, path := range paths {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		m.Packages = append(m.Packages, pkg)
	}
	return m, nil
}

// hasSegment reports whether the slash-separated path has the element seg.
func hasSegment(path, seg string) bool {
	for _, s := range strings.Split(path, "/") {
		if s == seg {
			return true
		}
	}
	return false
}

// goList runs go list in dir and returns its standard output.
func goList(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// Lines returns the API of every package of m, sorted.
func (m *Module) Lines() []string {
	var lines []string
	for _, pkg := range m.Packages {
		lines = append(lines, Lines(pkg)...)
	}
	sort.Strings(lines)
	return lines
}

// Record returns the text of m's record file: a header of comment lines,
// then m.Lines().
func (m *Module) Record() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The exported API of module %s, one line per identifier, method,\n", m.Path)
	fmt.Fprintf(&b, "# struct field and interface method. TestAPIMatchesRecord fails when the code differs;\n")
	fmt.Fprintf(&b, "# a change to the API changes this file in the same commit (CONTRIBUTING.md, \"The API on\n")
	fmt.Fprintf(&b, "# record\"). To rewrite it from the code, in the module's directory:\n")
	fmt.Fprintf(&b, "#\t%s\n", UpdateCommand)
	for _, l := range m.Lines() {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseRecord returns the lines of a record file, without its comments and
// blank lines.
func ParseRecord(text string) []string {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// Diff returns the lines of got that want lacks (added) and those of want
// that got lacks (removed), each sorted.
func Diff(want, got []string) (added, removed []string) {
	in := func(lines []string) map[string]bool {
		m := make(map[string]bool, len(lines))
		for _, l := range lines {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	for l := range g {
		if !w[l] {
			added = append(added, l)
		}
	}
	for l := range w {
		if !g[l] {
			removed = append(removed, l)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// Lines returns the API of pkg: one line per exported constant, variable,
// function, type, method of an exported type, exported struct field and
// interface method, sorted.
func Lines(pkg *types.Package) []string {
	w := &writer{pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w.params = nil
		switch obj := obj.(type) {
		case *types.Const:
			w.emit("const %s = %s", name, constValue(obj.Val()))
			w.emit("const %s %s", name, w.typ(obj.Type()))
		case *types.Var:
			w.emit("var %s %s", name, w.typ(obj.Type()))
		case *types.Func:
			sig := obj.Type().(*types.Signature)
			w.params = sig.TypeParams()
			w.emit("func %s%s%s", name, w.typeParams(sig.TypeParams()), w.signature(sig))
		case *types.TypeName:
			w.typeName(obj)
		}
	}
	sort.Strings(w.lines)
	return w.lines
}

// writer writes the lines of one package.
type writer struct {
	pkg    *types.Package
	lines  []string
	params *types.TypeParamList // of the declaration being written: $0, $1...
}

func (w *writer) emit(format string, args ...any) {
	w.lines = append(w.lines, "pkg "+w.pkg.Path()+", "+fmt.Sprintf(format, args...))
}

// typeName writes a type declaration, its fields or interface methods, and
// its methods.
func (w *writer) typeName(obj *types.TypeName) {
	name := obj.Name()
	if obj.IsAlias() {
		w.emit("type %s = %s", name, w.typ(obj.Type()))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		w.emit("type %s %s", name, w.typ(obj.Type()))
		return
	}
	w.params = named.TypeParams()
	decl := name + w.typeParams(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.emit("type %s struct", decl)
		w.fields(decl, u)
	case *types.Interface:
		var exported, unexported []string
		for i := 0; i < u.NumMethods(); i++ {
			m := u.Method(i)
			if m.Exported() {
				exported = append(exported, m.Name())
				w.emit("type %s interface, %s%s", decl, m.Name(), w.signature(m.Type().(*types.Signature)))
			} else {
				unexported = append(unexported, m.Name())
			}
		}
		if len(unexported) > 0 {
			w.emit("type %s interface, unexported methods", decl)
			exported = append(exported, "unexported methods")
		}
		for i := 0; i < u.NumEmbeddeds(); i++ {
			if e := u.EmbeddedType(i); !types.IsInterface(e) {
				w.emit("type %s interface, %s", decl, w.typ(e)) // a type set's terms
			}
		}
		if len(exported) == 0 {
			w.emit("type %s interface {}", decl)
		} else {
			w.emit("type %s interface { %s }", decl, strings.Join(exported, ", "))
		}
	default:
		w.emit("type %s %s", decl, w.typ(u))
	}
	recv := name
	if n := named.TypeParams().Len(); n > 0 {
		args := make([]string, n)
		for j := range args {
			args[j] = "$" + strconv.Itoa(j)
		}
		recv += "[" + strings.Join(args, ", ") + "]"
	}
	for i := 0; i < named.NumMethods(); i++ {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		w.params = sig.RecvTypeParams()
		r := recv
		if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
			r = "*" + r
		}
		w.emit("method (%s) %s%s", r, m.Name(), w.signature(sig))
	}
	// Methods promoted from an embedded type that is not exported are the
	// type's own as far as its users can tell: listed as if declared on it.
	// (Those of an exported embedded type are that type's lines, and the
	// "embedded" line says the type has them.)
	if _, ok := named.Underlying().(*types.Struct); !ok {
		return
	}
	w.params = named.TypeParams()
	values := types.NewMethodSet(named)
	all := types.NewMethodSet(types.NewPointer(named))
	for i := 0; i < all.Len(); i++ {
		sel := all.At(i)
		if len(sel.Index()) == 1 || !sel.Obj().Exported() || w.viaExportedField(named, sel.Index()) {
			continue
		}
		r := recv
		if values.Lookup(sel.Obj().Pkg(), sel.Obj().Name()) == nil {
			r = "*" + r
		}
		w.emit("method (%s) %s%s", r, sel.Obj().Name(), w.signature(sel.Type().(*types.Signature)))
	}
}

// fields writes the exported fields of a struct type, and the embedded
// fields users can name; the exported fields of an embedded struct type that
// is not exported are written as the struct's own.
func (w *writer) fields(decl string, s *types.Struct) {
	for i := 0; i < s.NumFields(); i++ {
		f := s.Field(i)
		switch {
		case f.Embedded() && (f.Exported() || isExportedType(f.Type())):
			w.emit("type %s struct, embedded %s", decl, w.typ(f.Type()))
		case f.Embedded():
			t := f.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if inner, ok := types.Unalias(t).Underlying().(*types.Struct); ok {
				w.fields(decl, inner)
			}
		case f.Exported():
			w.emit("type %s struct, %s %s", decl, f.Name(), w.typ(f.Type()))
		}
	}
}

// viaExportedField reports whether the path of embedded fields index (a
// selection's) starts with an embedded field whose type is exported.
func (w *writer) viaExportedField(named *types.Named, index []int) bool {
	s, ok := named.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	f := s.Field(index[0])
	return f.Exported() || isExportedType(f.Type())
}

// isExportedType reports whether t, or what it points to, is an exported
// named type.
func isExportedType(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Exported()
}

// typeParams writes a declaration's type parameters with their constraints:
// [$0 comparable, $1 any].
func (w *writer) typeParams(list *types.TypeParamList) string {
	if list.Len() == 0 {
		return ""
	}
	parts := make([]string, list.Len())
	for i := range parts {
		parts[i] = "$" + strconv.Itoa(i) + " " + w.typ(list.At(i).Constraint())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// signature writes a function's parameters and results, without names:
// (context.Context, ...Option) error.
func (w *writer) signature(sig *types.Signature) string {
	params := make([]string, sig.Params().Len())
	for i := range params {
		t := sig.Params().At(i).Type()
		if sig.Variadic() && i == len(params)-1 {
			params[i] = "..." + w.typ(t.(*types.Slice).Elem())
		} else {
			params[i] = w.typ(t)
		}
	}
	s := "(" + strings.Join(params, ", ") + ")"
	switch r := sig.Results(); r.Len() {
	case 0:
	case 1:
		s += " " + w.typ(r.At(0).Type())
	default:
		results := make([]string, r.Len())
		for i := range results {
			results[i] = w.typ(r.At(i).Type())
		}
		s += " (" + strings.Join(results, ", ") + ")"
	}
	return s
}

// typ writes a type as Go source would, with the package's own types
// unqualified and the others qualified by their package's name, type
// parameters numbered, aliases resolved and the empty interface as any.
func (w *writer) typ(t types.Type) string {
	switch t := types.Unalias(t).(type) {
	case *types.Basic:
		return t.Name()
	case *types.Named:
		s := t.Obj().Name()
		if p := t.Obj().Pkg(); p != nil && p != w.pkg {
			s = p.Name() + "." + s
		}
		if args := t.TypeArgs(); args.Len() > 0 {
			parts := make([]string, args.Len())
			for i := range parts {
				parts[i] = w.typ(args.At(i))
			}
			s += "[" + strings.Join(parts, ", ") + "]"
		}
		return s
	case *types.TypeParam:
		for i := 0; w.params != nil && i < w.params.Len(); i++ {
			if w.params.At(i) == t {
				return "$" + strconv.Itoa(i)
			}
		}
		return "$" + strconv.Itoa(t.Index())
	case *types.Pointer:
		return "*" + w.typ(t.Elem())
	case *types.Slice:
		return "[]" + w.typ(t.Elem())
	case *types.Array:
		return "[" + strconv.FormatInt(t.Len(), 10) + "]" + w.typ(t.Elem())
	case *types.Map:
		return "map[" + w.typ(t.Key()) + "]" + w.typ(t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return "chan<- " + w.typ(t.Elem())
		case types.RecvOnly:
			return "<-chan " + w.typ(t.Elem())
		}
		return "chan " + w.typ(t.Elem())
	case *types.Signature:
		return "func" + w.signature(t)
	case *types.Struct:
		fields := make([]string, t.NumFields())
		for i := range fields {
			f := t.Field(i)
			if f.Embedded() {
				fields[i] = w.typ(f.Type())
			} else {
				fields[i] = f.Name() + " " + w.typ(f.Type())
			}
		}
		if len(fields) == 0 {
			return "struct{}"
		}
		return "struct{ " + strings.Join(fields, "; ") + " }"
	case *types.Interface:
		var parts []string
		for i := 0; i < t.NumMethods(); i++ {
			m := t.Method(i)
			parts = append(parts, m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		for i := 0; i < t.NumEmbeddeds(); i++ {
			if e := t.EmbeddedType(i); !types.IsInterface(e) {
				parts = append(parts, w.typ(e))
			}
		}
		if t.IsComparable() && len(parts) == 0 && !t.Empty() {
			return "comparable"
		}
		if len(parts) == 0 {
			return "any"
		}
		return "interface{ " + strings.Join(parts, "; ") + " }"
	case *types.Union:
		terms := make([]string, t.Len())
		for i := range terms {
			term := t.Term(i)
			terms[i] = w.typ(term.Type())
			if term.Tilde() {
				terms[i] = "~" + terms[i]
			}
		}
		return strings.Join(terms, " | ")
	case *types.Tuple:
		parts := make([]string, t.Len())
		for i := range parts {
			parts[i] = w.typ(t.At(i).Type())
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return t.String()
}

// constValue writes a constant's value: exact for integers, strings and
// booleans, the shortest decimal that reads back for floats.
func constValue(v constant.Value) string {
	if v.Kind() == constant.Float {
		f, _ := constant.Float64Val(v)
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return v.ExactString()
}
