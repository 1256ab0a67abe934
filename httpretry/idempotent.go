package httpretry

import "net/http"

// IsIdempotent reports whether req may be sent more than once without
// changing its effect on the server, by RFC 9110 §9.2.2: its method is GET
// (or empty, which means GET), HEAD, OPTIONS, TRACE, PUT or DELETE, or it
// carries an Idempotency-Key or X-Idempotency-Key header, the client's
// promise that the server recognises a repeat. It is the default of
// [Transport.Idempotent], and the building block for a rule of your own:
//
//	t.Idempotent = func(req *http.Request) bool {
//		return httpretry.IsIdempotent(req) || req.URL.Path == "/search"
//	}
func IsIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	// Present, even empty, as net/http's own Transport reads these headers
	// when it decides whether it may resend a request.
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}
