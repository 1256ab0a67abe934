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
