package httpretry

// MaxDrain is how much of a retried response's body is read before the wait.
const MaxDrain = maxDrain

// QuotaOf is quotaOf.
var QuotaOf = quotaOf
