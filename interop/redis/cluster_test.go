package redis_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClusterHarness(t *testing.T) {
	c := startCluster(t)
	cl := c.client()
	ctx := context.Background()
	require.NoError(t, cl.Set(ctx, "a", "1", 0).Err())
	require.Equal(t, "1", cl.Get(ctx, "a").Val())
	t.Log(c.masterOf("a").addr())
}
