package backoff_test

import (
	"errors"
	"fmt"
	"github.com/retrykit/backoff"
	"github.com/stretchr/testify/assert"
	"io"
	"testing"
)

func TestPermanent(t *testing.T) {
	assert.NoError(t, backoff.Permanent(nil), "Permanent(nil) is nil")

	err := backoff.Permanent(io.EOF)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, io.EOF.Error(), err.Error())
	assert.True(t, backoff.IsPermanent(err))

	wrapped := fmt.Errorf("reading: %w", err)
	assert.True(t, backoff.IsPermanent(wrapped), "the mark survives wrapping")
	var p *backoff.PermanentError
	assert.True(t, errors.As(wrapped, &p))
	assert.Equal(t, io.EOF, p.Err)

	assert.False(t, backoff.IsPermanent(io.EOF))
	assert.False(t, backoff.IsPermanent(nil))
}

// TestPermanentIsRecognisedByIsPermanentNotByErrorsIs: cenkalti/backoff v4's
// PermanentError matched any other with errors.Is(err,
// &backoff.PermanentError{}); ours has no Is method, so that test is false
// and IsPermanent (or errors.As) is the one to use.
func TestPermanentIsRecognisedByIsPermanentNotByErrorsIs(t *testing.T) {
	err := fmt.Errorf("get: %w", backoff.Permanent(io.EOF))
	assert.NotErrorIs(t, err, &backoff.PermanentError{})
	assert.NotErrorIs(t, err, &backoff.PermanentError{Err: io.EOF})
	assert.True(t, backoff.IsPermanent(err))
}
