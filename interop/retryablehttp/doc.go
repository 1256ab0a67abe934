// Package retryablehttp holds no code: its test measures
// github.com/retrykit/backoff/httpretry and github.com/hashicorp/go-retryablehttp
// on the same scenarios, and checks the side-by-side table in
// httpretry/README.md against what it measured. It is a module of its own so
// that the library never depends on go-retryablehttp.
package retryablehttp
