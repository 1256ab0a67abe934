package bench

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/retrykit/backoff"
)

// TestLimiterMatchesXTimeRate replays random sequences of AllowN, ReserveN,
// Cancel, SetLimit, SetBurst and Tokens on our Limiter (driven by a fake
// clock) and on x/time/rate's (driven by its *At forms at the same
// instants), and requires identical answers: the same OKs, the same delays
// to the nanosecond, the same token counts to the last bit. The clock only
// moves forward (ours and x/time/rate differ, by design, when it goes back).
func TestLimiterMatchesXTimeRate(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limits := []float64{0, 0.5, 1, 3, 7.3, 10, 1e6, backoff.InfLimit}
	sequences := 300
	if testing.Short() {
		sequences = 30
	}
	for seq := range sequences {
		rng := rand.New(rand.NewPCG(uint64(seq), 23))
		limit := limits[rng.IntN(len(limits)-1)] // start finite
		burst := rng.IntN(6)
		clk := clocktesting.NewFakeClock(start)
		ours := backoff.NewLimiter(limit, burst, backoff.WithClock(clk))
		theirs := rate.NewLimiter(rate.Limit(limit), burst)
		type pair struct {
			ours   backoff.Reservation
			theirs *rate.Reservation
		}
		var open []pair
		for op := range 200 {
			switch rng.IntN(4) {
			case 0: // stand still
			case 1:
				clk.Step(time.Duration(rng.Int64N(int64(time.Millisecond))))
			default:
				clk.Step(time.Duration(rng.Int64N(int64(2 * time.Second))))
			}
			now := clk.Now()
			where := func(what string) string {
				return what + " in sequence " + itoa(seq) + " at op " + itoa(op)
			}
			switch k := rng.IntN(20); {
			case k < 7:
				n := rng.IntN(burst + 2)
				if got, want := ours.AllowN(n), theirs.AllowN(now, n); got != want {
					t.Fatalf("%s: AllowN(%d) = %v, x/time/rate %v", where("AllowN"), n, got, want)
				}
			case k < 14:
				n := rng.IntN(burst + 2)
				ro, rt := ours.ReserveN(n), theirs.ReserveN(now, n)
				if ro.OK() != rt.OK() || ro.Delay() != rt.DelayFrom(now) {
					t.Fatalf("%s: ReserveN(%d) = %v %v, x/time/rate %v %v",
						where("ReserveN"), n, ro.OK(), ro.Delay(), rt.OK(), rt.DelayFrom(now))
				}
				open = append(open, pair{ro, rt})
			case k < 17:
				if len(open) == 0 {
					continue
				}
				// Each reservation is cancelled once: a second Cancel gives
				// tokens back again in x/time/rate, never in ours.
				i := rng.IntN(len(open))
				open[i].ours.Cancel()
				open[i].theirs.CancelAt(now)
				open = append(open[:i], open[i+1:]...)
			case k < 18:
				l := limits[rng.IntN(len(limits))]
				ours.SetLimit(l)
				theirs.SetLimitAt(now, rate.Limit(l))
			case k < 19:
				b := rng.IntN(6)
				ours.SetBurst(b)
				theirs.SetBurstAt(now, b)
			default:
				if got, want := ours.Tokens(), theirs.TokensAt(now); got != want {
					t.Fatalf("%s: Tokens = %v, x/time/rate %v", where("Tokens"), got, want)
				}
			}
		}
		if got, want := ours.Tokens(), theirs.TokensAt(clk.Now()); got != want {
			t.Fatalf("sequence %d: final Tokens = %v, x/time/rate %v", seq, got, want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
