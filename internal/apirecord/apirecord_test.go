package apirecord_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retrykit/backoff/internal/apirecord"
)

// src holds every shape of declaration the record writes.
const src = `package p

const Untyped = 5
const Typed Kind = 2
const Ratio = 0.1

var Sentinel error

type Kind int

func (k Kind) String() string { return "" }

type Queue[T comparable] struct {
	Exported T
	hidden   int
	Embedded
	*inner
}

func (q *Queue[T]) Add(item T, more ...T) {}
func (q *Queue[T]) unexported()           {}

type Embedded struct{ A int }

type inner struct{ Promoted string }

func (*inner) Shared() bool { return true }

type Limiter[K comparable, V any] interface {
	When(K) V
	Forget(K)
	private()
}

type Number interface{ ~int | ~float64 }

type Alias = Queue[string]

type Handler func(ctx any, items []Kind) (map[string]Kind, error)

func Map[T, U any](s []T, f func(T) U) []U { return nil }

func Sum[N Number](n ...N) N { var zero N; return zero }

func Chans(send chan<- int, recv <-chan struct{}) [2]Kind { return [2]Kind{} }

func unexported() {}
`

func TestLines(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	require.NoError(t, err)
	pkg, err := (&types.Config{}).Check("example.com/p", fset, []*ast.File{f}, nil)
	require.NoError(t, err)
	const p = "pkg example.com/p, "
	assert.Equal(t, []string{
		p + "const Ratio = 0.1",
		p + "const Ratio untyped float",
		p + "const Typed = 2",
		p + "const Typed Kind",
		p + "const Untyped = 5",
		p + "const Untyped untyped int",
		p + "func Chans(chan<- int, <-chan struct{}) [2]Kind",
		p + "func Map[$0 any, $1 any]([]$0, func($0) $1) []$1",
		p + "func Sum[$0 Number](...$0) $0",
		p + "method (*Queue[$0]) Add($0, ...$0)",
		p + "method (Kind) String() string",
		p + "method (Queue[$0]) Shared() bool", // promoted through *inner: a value has it too
		p + "type Alias = Queue[string]",
		p + "type Embedded struct",
		p + "type Embedded struct, A int",
		p + "type Handler func(any, []Kind) (map[string]Kind, error)",
		p + "type Kind int",
		p + "type Limiter[$0 comparable, $1 any] interface { Forget, When, unexported methods }",
		p + "type Limiter[$0 comparable, $1 any] interface, Forget($0)",
		p + "type Limiter[$0 comparable, $1 any] interface, When($0) $1",
		p + "type Limiter[$0 comparable, $1 any] interface, unexported methods",
		p + "type Number interface {}",
		p + "type Number interface, ~int | ~float64",
		p + "type Queue[$0 comparable] struct",
		p + "type Queue[$0 comparable] struct, Exported $0",
		p + "type Queue[$0 comparable] struct, Promoted string",
		p + "type Queue[$0 comparable] struct, embedded Embedded",
		p + "var Sentinel error",
	}, apirecord.Lines(pkg))
}

func TestDiff(t *testing.T) {
	want := apirecord.ParseRecord("# a comment\n\npkg p, func A()\npkg p, func B()\n")
	added, removed := apirecord.Diff(want, []string{"pkg p, func B()", "pkg p, func C() error"})
	assert.Equal(t, []string{"pkg p, func C() error"}, added)
	assert.Equal(t, []string{"pkg p, func A()"}, removed)
}
