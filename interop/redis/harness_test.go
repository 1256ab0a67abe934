package redis_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	backoffredis "github.com/retrykit/backoff/interop/redis"
)

// server is a redis-server of the test's own, on a free loopback port, with
// persistence off and its files in a temporary directory: never a system
// service.
type server struct {
	tb   testing.TB
	bin  string
	dir  string
	port int
	args []string // beyond the common ones (the cluster's)
	cmd  *exec.Cmd
}

// startServer starts a redis-server for tb and stops it when tb ends. Without
// the binary the test is skipped, except under CI=true, where it fails.
func startServer(tb testing.TB) *server {
	tb.Helper()
	s := newServer(tb, lookBinary(tb, "redis-server"))
	s.start()
	return s
}

// lookBinary returns the path of one of the redis-server package's binaries.
// Without it the test is skipped, except under CI=true, where it fails.
func lookBinary(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		msg := name + " not found in PATH; install it with `sudo apt-get update && sudo apt-get install -y redis-server` (or `brew install redis`)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}

// newServer returns a server of bin on a free loopback port, not started,
// killed when tb ends.
func newServer(tb testing.TB, bin string, args ...string) *server {
	tb.Helper()
	s := &server{tb: tb, bin: bin, dir: tb.TempDir(), port: freePort(tb), args: args}
	tb.Cleanup(func() { s.kill() })
	return s
}

// freePort returns a loopback port that nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *server) start() {
	s.tb.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	// The server accepts connections a few milliseconds after it starts.
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on %s did not start: %v", s.addr(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once continued on some kernels
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// stop freezes the server (SIGSTOP): connections stay open, nothing answers.
func (s *server) stop() { s.signal(syscall.SIGSTOP) }

// cont resumes a frozen server.
func (s *server) cont() { s.signal(syscall.SIGCONT) }

func (s *server) signal(sig os.Signal) {
	s.tb.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatal(err)
	}
}

// client returns a new client (its own connection pool) of the server,
// closed when the test ends.
func (s *server) client() *goredis.Client {
	c := goredis.NewClient(s.options())
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// options are the client options a limiter needs: without
// ContextTimeoutEnabled, go-redis ignores the per-call deadline.
func (s *server) options() *goredis.Options {
	return &goredis.Options{Addr: s.addr(), ContextTimeoutEnabled: true}
}

// serverTime returns the server's clock.
func serverTime(tb testing.TB, c goredis.UniversalClient) time.Time {
	tb.Helper()
	t, err := c.Time(context.Background()).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// serverSpan is a stretch of the server's clock that starts with a TIME read
// before the decisions it covers. The server computes every delay from its
// own clock, so a delay is bounded by what that clock read before and after
// the decision, however long the machine took to run the test.
type serverSpan struct {
	tb    testing.TB
	c     goredis.UniversalClient
	start time.Time
}

// openSpan reads the server's clock: the decisions made after it returns
// are covered by the span.
func openSpan(tb testing.TB, c goredis.UniversalClient) *serverSpan {
	tb.Helper()
	return &serverSpan{tb: tb, c: c, start: serverTime(tb, c)}
}

// elapsed reads the server's clock again and returns the server time since
// the span opened: at least the server time between any two decisions made
// since then and before this call.
func (s *serverSpan) elapsed() time.Duration {
	s.tb.Helper()
	return serverTime(s.tb, s.c).Sub(s.start)
}

// generous is the timeout of the tests that are not about faults: on a
// loaded machine under the race detector, a first call (dial, handshake,
// script load) can take longer than the default 50 ms, and those tests check
// shared decisions, not the fallback.
var generous = backoffredis.WithTimeout(2 * time.Second)
