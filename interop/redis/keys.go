package redis

import "strings"

// The key layout. By default every key of one limiter shares the hash tag
// {name}, so that in a Redis Cluster they all live in one slot: the batched
// script can then read them in one call, and a limiter's keys move together.
// [WithSpreadKeys] gives each key of a KeyedLimiter or requeue limiter a tag
// of its own, so that a Cluster spreads them over its masters.
//
//	<prefix>{<name>}            a Limiter's one key
//	<prefix>{<name>}:<key>      a KeyedLimiter's key
//	<prefix>{<name>}:<item>     a requeue limiter's failure count of item
//	<prefix>{<name>:<key>}      either's key, WithSpreadKeys

// baseKey returns prefix{name}, after checking name.
func baseKey(where, prefix, name string) string {
	checkName(where, name)
	return prefix + "{" + name + "}"
}

func checkName(where, name string) {
	if name == "" || strings.ContainsAny(name, "{}") {
		badArgument(where, "name must be non-empty and contain no '{' or '}'", name)
	}
}

// keyLayout builds the Redis keys of a KeyedLimiter's keys or of a requeue
// limiter's items.
type keyLayout struct {
	base   string // <prefix>{<name>}: or, spread, <prefix>{<name>:
	spread bool
}

func newKeyLayout(where string, c config, name string) keyLayout {
	checkName(where, name)
	if c.spreadKeys {
		return keyLayout{base: c.prefix + "{" + name + ":", spread: true}
	}
	return keyLayout{base: c.prefix + "{" + name + "}:"}
}

// key returns the Redis key of k. A spread key's tag ends at the first '}'
// of k, if k has one: keys that share what comes before it share a slot,
// which changes where they live, not what they mean.
func (kl keyLayout) key(k string) string {
	if kl.spread {
		return kl.base + k + "}"
	}
	return kl.base + k
}

// what names the limiter in logs: <prefix>{<name>}.
func (kl keyLayout) what() string {
	if kl.spread {
		return kl.base[:len(kl.base)-1] + "}"
	}
	return kl.base[:len(kl.base)-1]
}
