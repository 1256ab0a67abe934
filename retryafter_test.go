package backoff_test

import (
	"fmt"
	"github.com/retrykit/backoff"
	"strconv"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"seconds", "120", 120 * time.Second, true},
		{"zero seconds", "0", 0, true},
		{"leading zeros", "007", 7 * time.Second, true},
		{"nine", "59", 59 * time.Second, true},
		{"spaces around", "  3 ", 3 * time.Second, true},
		{"a year exactly", strconv.Itoa(365 * 24 * 3600), backoff.MaxParsedRetryAfter, true},
		{"over a year", strconv.Itoa(365*24*3600 + 1), 0, false},
		{"a year's seconds, then a digit", strconv.Itoa(365*24*3600) + "0", 0, false},
		{"digits past int64", "99999999999999999999999999", 0, false},
		{"empty", "", 0, false},
		{"blank", "   ", 0, false},
		{"negative", "-5", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"garbage", "soon", 0, false},
		{"IMF-fixdate ahead", "Wed, 21 Oct 2015 07:28:30 GMT", 30 * time.Second, true},
		{"RFC 850 ahead", "Wednesday, 21-Oct-15 07:29:00 GMT", time.Minute, true},
		{"asctime ahead", "Wed Oct 21 07:28:02 2015", 2 * time.Second, true},
		{"date now", "Wed, 21 Oct 2015 07:28:00 GMT", 0, true},
		{"date in the past", "Tue, 20 Oct 2015 07:28:00 GMT", 0, true},
		{"date a year ahead exactly", "Thu, 20 Oct 2016 07:28:00 GMT", backoff.MaxParsedRetryAfter, true},
		{"date a year and a second ahead", "Thu, 20 Oct 2016 07:28:01 GMT", 0, false},
		{"date two years ahead", "Sat, 21 Oct 2017 07:28:00 GMT", 0, false},
		{"date in another zone", "Wed, 21 Oct 2015 07:28:30 CET", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := backoff.ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "Wed Oct 21 07:28:02 2015", "1e9", ""} {
		f.Add(s, int64(1445412480))
	}
	f.Fuzz(func(t *testing.T, value string, unix int64) {
		d, ok := backoff.ParseRetryAfter(value, time.Unix(unix, 0))
		if d < 0 || d > backoff.MaxParsedRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v: outside [0, MaxParsedRetryAfter]", value, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: an absent value must come with 0", value, d)
		}
	})
}

func ExampleParseRetryAfter() {
	now := time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, v := range []string{"120", "Wed, 21 Oct 2015 07:29:00 GMT", "", "-1", "tomorrow"} {
		d, ok := backoff.ParseRetryAfter(v, now)
		fmt.Printf("%-32q %v %v\n", v, d, ok)
	}
	// Output:
	// "120"                            2m0s true
	// "Wed, 21 Oct 2015 07:29:00 GMT"  1m0s true
	// ""                               0s false
	// "-1"                             0s false
	// "tomorrow"                       0s false
}
