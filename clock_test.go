package backoff_test

import "time"

// epoch is where every fake clock of the black-box tests starts. Tests of
// every part of the package share it, so it lives in a file of its own.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
