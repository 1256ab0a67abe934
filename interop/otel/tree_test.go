package otel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// newTracer returns an SDK TracerProvider that records every span in the
// returned recorder.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

// tree renders the ended spans as an indented tree, children under their
// parent in the order they started, with times as offsets from epoch (or
// "real" for a span whose times are the real clock's), their attributes
// sorted by key, and their events. Attributes whose key is in skip are left
// out.
func tree(spans []sdktrace.ReadOnlySpan, skip ...attribute.Key) string {
	byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); p.IsValid() && ids[p] {
			byParent[p] = append(byParent[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	at := func(t time.Time) string {
		if d := t.Sub(epoch); d >= 0 && d < time.Hour {
			return d.String()
		}
		return "real"
	}
	attrs := func(kvs []attribute.KeyValue) string {
		var parts []string
		for _, kv := range kvs {
			if !slices.Contains(skip, kv.Key) {
				parts = append(parts, fmt.Sprintf("%s=%s", kv.Key, kv.Value.String()))
			}
		}
		slices.Sort(parts)
		return strings.Join(parts, " ")
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		ind := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%s %s [%s..%s] %s", ind, s.Name(), s.SpanKind(), at(s.StartTime()), at(s.EndTime()), s.Status().Code)
		if a := attrs(s.Attributes()); a != "" {
			fmt.Fprintf(&b, " %s", a)
		}
		b.WriteString("\n")
		for _, e := range s.Events() {
			fmt.Fprintf(&b, "%s  event %s @%s %s\n", ind, e.Name, at(e.Time), attrs(e.Attributes))
		}
		kids := byParent[s.SpanContext().SpanID()]
		slices.SortStableFunc(kids, func(x, y sdktrace.ReadOnlySpan) int { return x.StartTime().Compare(y.StartTime()) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// assertTree fails t if the recorded spans do not render as want.
func assertTree(t *testing.T, sr *tracetest.SpanRecorder, want string, skip ...attribute.Key) {
	t.Helper()
	got := tree(sr.Ended(), skip...)
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Errorf("spans:\n%s\nwant:\n%s", got, want)
	}
}
