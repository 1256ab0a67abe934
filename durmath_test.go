package backoff

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestAddDuration(t *testing.T) {
	tests := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{"small", time.Second, 2 * time.Second, 3 * time.Second},
		{"negative is zero", -time.Second, time.Second, time.Second},
		{"saturates", maxDuration - 1, 2, maxDuration},
		{"max plus max", maxDuration, maxDuration, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, addDuration(tt.a, tt.b))
		})
	}
}

func TestShiftDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		n    int
		want time.Duration
	}{
		{"5ms·2^17 exact", 5 * time.Millisecond, 17, 655360 * time.Millisecond},
		{"zero shift", time.Second, 0, time.Second},
		{"negative shift", time.Second, -3, time.Second},
		{"zero base", 0, 10, 0},
		{"zero base, shift past the width", 0, 63, 0},
		{"negative base", -time.Second, 1, 0},
		{"largest that fits", 1, 62, 1 << 62},
		{"one past fits", 1, 63, maxDuration},
		{"huge shift", 1, 1 << 30, maxDuration},
		{"quarter of max, third step", maxDuration / 4, 2, maxDuration - 3},
		{"quarter of max overflows", maxDuration/4 + 1, 2, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, shiftDuration(tt.d, tt.n))
		})
	}
}

func TestScaleDuration(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		f    float64
		want time.Duration
	}{
		{"double", time.Second, 2, 2 * time.Second},
		{"fraction", time.Second, 0.5, 500 * time.Millisecond},
		{"zero factor", time.Second, 0, 0},
		{"negative factor", time.Second, -1, 0},
		{"NaN factor", time.Second, math.NaN(), 0},
		{"Inf factor", time.Second, math.Inf(1), maxDuration},
		{"negative duration", -time.Second, 2, 0},
		{"saturates", maxDuration / 2, 3, maxDuration},
		{"max times one", maxDuration, 1, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, scaleDuration(tt.d, tt.f))
		})
	}
}

func TestClampDuration(t *testing.T) {
	assert.Equal(t, time.Duration(0), clampDuration(-time.Second, time.Minute))
	assert.Equal(t, time.Minute, clampDuration(time.Hour, time.Minute))
	assert.Equal(t, time.Hour, clampDuration(time.Hour, 0), "limit 0 means no limit")
	assert.Equal(t, time.Second, clampDuration(time.Second, time.Minute))
}

func TestRandDuration(t *testing.T) {
	for _, n := range []time.Duration{0, -time.Second, math.MinInt64} {
		assert.Zero(t, randDuration(n), "randDuration(%v)", n)
	}
	assert.Zero(t, randDuration(1), "the only value in [0, 1)")
	for range 100 {
		d := randDuration(time.Second)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.Less(t, d, time.Second)
	}
}
