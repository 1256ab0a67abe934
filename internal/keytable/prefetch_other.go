//go:build go1.24 && !amd64 && !arm64

package keytable

// prefetch does nothing on this architecture.
func prefetch(uintptr) {}
