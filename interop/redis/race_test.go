//go:build race

package redis_test

// raceEnabled says that the tests run under the race detector, which
// multiplies the client's CPU per round trip: the scale test then checks
// the bound, not the throughput.
const raceEnabled = true
