module github.com/retrykit/backoff

// go 1.22 is the lowest version the code builds with: it uses math/rand/v2
// (lock-free per-goroutine randomness for jitter, 1.22), context.AfterFunc and
// the min/max builtins (1.21), and tests rely on per-iteration loop variables
// (1.22). k8s.io/utils is pinned to the newest version whose go.mod still says
// go 1.18; later versions require go 1.25 for code we do not use. .ci/run
// builds and tests the library with the newest go1.22 release too.
go 1.22

require (
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	k8s.io/utils v0.0.0-20251002143259-bc988d571ff4
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
