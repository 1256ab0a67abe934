//go:build go1.24

package backoff

import "fmt"

// storage identifies the memory that holds the states, for tests that check
// whether it was kept or replaced.
func (s *itemStates[T]) storage() string { return fmt.Sprintf("%p", s.tab.Load()) }
