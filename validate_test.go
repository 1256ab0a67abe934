package backoff_test

import (
	"context"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNilArgumentsPanicAtTheCall: a nil ctx, fn or condition used to crash
// with a bare nil dereference, from wherever it was first used (for
// RunWorkers, a worker goroutine the caller cannot recover). Each now panics
// on the caller's goroutine, before doing anything, naming the function and
// the parameter.
func TestNilArgumentsPanicAtTheCall(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	s := backoff.Schedule{Duration: time.Millisecond, Steps: 2}
	ok := func(context.Context) (bool, error) { return true, nil }
	tests := []struct {
		want string
		call func()
	}{
		{"Retry: ctx", func() { _ = backoff.Retry(nilCtx, s, func(context.Context) error { return nil }) }},
		{"Retry: fn", func() { _ = backoff.Retry(ctx, s, nil) }},
		{"RetryValue: ctx", func() {
			_, _ = backoff.RetryValue(nilCtx, s, func(context.Context) (int, error) { return 1, nil })
		}},
		{"RetryValue: fn", func() { _, _ = backoff.RetryValue[int](ctx, s, nil) }},
		{"ExponentialBackoff: condition", func() { _ = backoff.ExponentialBackoff(s, nil) }},
		{"ExponentialBackoffWithContext: ctx", func() { _ = backoff.ExponentialBackoffWithContext(nilCtx, s, ok) }},
		{"ExponentialBackoffWithContext: condition", func() { _ = backoff.ExponentialBackoffWithContext(ctx, s, nil) }},
		{"OnError: fn", func() { _ = backoff.OnError(s, nil, nil) }},
		{"PollUntilContextCancel: ctx", func() { _ = backoff.PollUntilContextCancel(nilCtx, time.Second, true, ok) }},
		{"PollUntilContextCancel: condition", func() { _ = backoff.PollUntilContextCancel(ctx, time.Second, true, nil) }},
		{"PollUntilContextTimeout: ctx", func() {
			_ = backoff.PollUntilContextTimeout(nilCtx, time.Second, time.Minute, true, ok)
		}},
		{"PollUntilContextTimeout: condition", func() {
			_ = backoff.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			fn, param, _ := strings.Cut(tt.want, ": ")
			assert.PanicsWithValue(t, "backoff: "+fn+": "+param+" must not be nil, got <nil>", tt.call)
		})
	}
}

// TestEveryPanicGoesThroughValidate: validate.go is the one way the package
// panics on bad input, so that every message has one shape. Before, five
// panic calls (WithClock, WithMetrics, WithLogger, NewRateLimitingQueue,
// RunWorkers, and the Backoff's zero value) wrote messages of their own. An
// invariant check that reports a bug of the package says "internal error".
func TestEveryPanicGoesThroughValidate(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "validate.go" {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
				arg := string(src[fset.Position(call.Pos()).Offset:fset.Position(call.End()).Offset])
				assert.Contains(t, arg, "internal error",
					"%s: bad input panics through validate.go's helpers", fset.Position(call.Pos()))
			}
			return true
		})
	}
}
