package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// numberToken is a number as the timelines print it, with an optional unit:
// 5, 0.005, 1310.715, 5.999s, 10m1s, 1m21.92s, 2^18·5.
var numberToken = regexp.MustCompile(`^[0-9][0-9.^·]*(ns|µs|ms|s|m|h)?([0-9.]+(ns|µs|ms|s|m|h))*$`)

// numbers returns every number that out prints, line by line, separated by
// spaces; lines without numbers are left out. It is what the tests below
// compare, so that renaming a column or rewording a note does not break
// them, while any changed, missing or extra number does.
func numbers(out string) string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		var nums []string
		for _, field := range strings.Fields(line) {
			field = strings.Trim(field, ",;:()")
			if numberToken.MatchString(field) {
				nums = append(nums, field)
			}
		}
		if len(nums) > 0 {
			lines = append(lines, strings.Join(nums, " "))
		}
	}
	return strings.Join(lines, "\n")
}

// TestTimelineNumbers pins, number by number, the timelines of requeue.go
// and crashloop.go that `go run ./examples/demo` (the README's command)
// prints, and checks that the command prints each of them whole.
func TestTimelineNumbers(t *testing.T) {
	all := runDemo(t, "", false)
	for _, tt := range []struct {
		name string
		run  func(io.Writer)
		want string
	}{
		{"runTickerGated", runTickerGated, wantTickerGated},
		{"runCrashLoop", runCrashLoop, wantCrashLoop},
		{"runLimiterSeries", runLimiterSeries, wantLimiterSeries},
		{"runObservedLog", runObservedLog, wantObservedLog},
		{"runPodBackoff", runPodBackoff, wantPodBackoff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.run(&out)
			assert.Equal(t, strings.TrimSpace(tt.want), numbers(out.String()))
			assert.Contains(t, all, out.String(), "the command prints this timeline")
		})
	}
}

// The expected numbers, line by line (see numbers). They are Kubernetes'
// series, reproduced: NewBackOff(5s, 60s) on a 1 s ticker; kubelet's
// crash loop (10 s doubling to 300 s, reset after 2×300 s); client-go's
// controller limiter, 5 ms·2^n capped at 1000 s, and controller-runtime's
// observed log; kube-scheduler's pod backoff, 1 s doubling to 10 s. Each ends
// with the numbers of its "Numbers:" line.
const wantTickerGated = `
1 1 1 5
2 6 5 10
3 16 10 20
4 36 20 40
5 76 40 60
6 136 60 60
7 196 60 60
1 6 11 21 41
1
1 1 1 5
2 7 5.999 10
3 18 10.999 20
4 39 20.999 40
5 80 40.999 60
6 141 60.999 60
5 60
`
const wantCrashLoop = `
1 0 0 10 1
2 10 10 20 2
3 30 20 40 3
4 70 40 80 4
5 150 80 160 5
6 310 160 300 6
7 610 300 300 7
8 910 300 300 8 601
9 1511 0 10 1
10 1521 10 20 2
11 1541 20 40 3
1 9
601
10 300
`
const wantLimiterSeries = `
1 0.005 0.005
2 0.01 0.015
3 0.02 0.035
4 0.04 0.075
5 0.08 0.155
6 0.16 0.315
7 0.32 0.635
8 0.64 1.275
9 1.28 2.555
10 2.56 5.115
11 5.12 10.235
12 10.24 20.475
13 20.48 40.955
14 40.96 81.915
15 81.92 163.835
16 163.84 327.675
17 327.68 655.355
18 655.36 1310.715
19 1000 2310.715
20 1000 3310.715
21 1000 4310.715
22 1000 5310.715
5 2^18·5 1310.72 1000
10 100
5 1000
10 100
`
const wantObservedLog = `
1 0
2 1 1 0.005 1
3 2 1 0.01 1
4 3 1 0.02 1
5 4 1 0.04 1
6 5 1 0.08 1
7 6 1 0.16 1
8 7 1 0.32 1
9 8 1 0.64 1
10 9.28 1.28 1.28
11 11.84 2.56 2.56
12 16.96 5.12 5.12
13 27.2 10.24 10.24
14 47.68 20.48 20.48
15 88.64 40.96 40.96
16 170.56 81.92 81.92
17 334.4 163.84 163.84
1.001 1.000 8 1
1.280 2.536 5.120 10.241 20.480 40.960 81.921 163.840
0.5 1.17
1s
`
const wantPodBackoff = `
1
1 0.3 1 1.3 2
2 1.6 2 3.6 4
3 3.9 4 7.9 8
4 8.2 8 16.2 17
5 16.5 10 26.5 27
6 26.8 10 36.8 37
7 37.1 10 47.1 48
300 1
1s 1
1 10
1
`
