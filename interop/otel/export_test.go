package otel

// StopReason exposes stopReason to the tests.
var StopReason = stopReason
