package clientgobackoff_test

import (
	"testing"

	"github.com/retrykit/backoff/internal/apirecord"
)

// TestAPIMatchesRecord: the exported API of the module is the one written
// down in api/clientgo.txt, so that no exported signature changes by accident.
// To change the API, change the record in the same commit (the repository's
// CONTRIBUTING.md, "The API on record"):
//
//	go test -run TestAPIMatchesRecord -update-api .
func TestAPIMatchesRecord(t *testing.T) {
	apirecord.Check(t, "api/clientgo.txt")
}
