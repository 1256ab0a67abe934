package redis

import "strings"

// The key layout. Every key of one limiter shares the hash tag {name}, so
// that in a Redis Cluster they all live in one slot: the batched script can
// then read them in one call, and a limiter's keys move together.
//
//	<prefix>{<name>}            a Limiter's one key
//	<prefix>{<name>}:<key>      a KeyedLimiter's key
//	<prefix>{<name>}:<item>     a requeue limiter's failure count of item

// baseKey returns prefix{name}, after checking name.
func baseKey(where, prefix, name string) string {
	if name == "" || strings.ContainsAny(name, "{}") {
		badArgument(where, "name must be non-empty and contain no '{' or '}'", name)
	}
	return prefix + "{" + name + "}"
}
