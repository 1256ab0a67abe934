package httpretry

import (
	"bytes"
	"io"
	"net/http"
)

// maxDrain bounds what is read from the body of a response that may be
// discarded. Reading a body to its end lets net/http reuse the connection;
// past this much, closing the connection and opening another is cheaper than
// reading on.
const maxDrain = 64 << 10

// release reads the body of a response that the Transport is about to retry
// and closes it, so that its connection returns to the pool before the wait,
// and gives resp a body that replays what was read, in case it is the
// response RoundTrip ends up returning. A body longer than maxDrain, or one
// whose read fails, is left open behind what was read: it is closed by
// discard, or read on by the caller.
func release(resp *http.Response) {
	body := resp.Body
	read, err := io.ReadAll(io.LimitReader(body, maxDrain+1))
	if err == nil && len(read) <= maxDrain {
		body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(read))
		return
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), body), body}
}

// discard drains (up to maxDrain) and closes the body of a response that
// RoundTrip does not return.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}
