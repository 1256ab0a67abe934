package backoff_test

import (
	"testing"

	"github.com/retrykit/backoff/internal/apirecord"
)

// TestAPIMatchesRecord: the exported API of the module (packages backoff,
// httpretry and backofftest) is the one written down in api/backoff.txt, so
// that no exported signature changes by accident. To change the API, change
// the record in the same commit (CONTRIBUTING.md, "The API on record"):
//
//	go test -run TestAPIMatchesRecord -update-api .
func TestAPIMatchesRecord(t *testing.T) {
	t.Parallel() // CPU-bound and self-contained: see TestMain
	apirecord.Check(t, "api/backoff.txt")
}
