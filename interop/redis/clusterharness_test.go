package redis_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is the cluster's cluster-node-timeout: how long a master
// may be unreachable before the others count it as failing and its replica
// takes over. Production clusters use 15 s by default; a short one keeps the
// failover tests short.
const clusterNodeTimeout = 1000 * time.Millisecond

// cluster is a Redis Cluster of the test's own: three masters and one
// replica of each, six redis-server processes on free loopback ports (and a
// free port each for the cluster bus), persistence off, files in temporary
// directories, killed when the test ends.
type cluster struct {
	tb    testing.TB
	nodes []*server
}

// startCluster starts the six servers, joins them with `redis-cli --cluster
// create`, and waits until every node reports cluster_state:ok, knows the
// six nodes and agrees on the masters, and every replica's link to its
// master is up. Without the binaries the test is skipped, except under
// CI=true, where it fails.
//
// cluster-require-full-coverage is off, as a cluster that must keep serving
// through a failover is configured: otherwise every master refuses every
// key while one master is down.
func startCluster(tb testing.TB) *cluster {
	tb.Helper()
	bin := lookBinary(tb, "redis-server")
	cli := lookBinary(tb, "redis-cli")
	c := &cluster{tb: tb}
	addrs := make([]string, 6)
	for i := range 6 {
		s := newServer(tb, bin)
		s.args = []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout.Milliseconds())),
			// The bus port defaults to port+10000, which may be taken
			// or out of range for an ephemeral port.
			"--cluster-port", strconv.Itoa(freePort(tb)),
			"--cluster-require-full-coverage", "no",
		}
		s.start()
		c.nodes = append(c.nodes, s)
		addrs[i] = s.addr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitHealthy(30 * time.Second)
	return c
}

// addrs returns the addresses of the nodes that are running.
func (c *cluster) addrs() []string {
	var out []string
	for _, s := range c.nodes {
		if s.cmd != nil {
			out = append(out, s.addr())
		}
	}
	return out
}

// client returns a new cluster client (its own connection pools), closed
// when the test ends.
func (c *cluster) client() *goredis.ClusterClient {
	cl := goredis.NewClusterClient(c.options())
	c.tb.Cleanup(func() { cl.Close() })
	return cl
}

// options are the cluster client options a limiter needs: without
// ContextTimeoutEnabled, go-redis ignores the per-call deadline.
func (c *cluster) options() *goredis.ClusterOptions {
	return &goredis.ClusterOptions{Addrs: c.addrs(), ContextTimeoutEnabled: true}
}

// nodeInfo is what one node says of the cluster.
type nodeInfo struct {
	state   string // cluster_state
	known   int    // cluster_known_nodes
	role    string // master or slave
	linkUp  bool   // a replica's link to its master
	masters string // the masters with slots, sorted, as this node sees them
	err     error
}

func (c *cluster) info(s *server) nodeInfo {
	cl := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var ni nodeInfo
	ci, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return nodeInfo{err: err}
	}
	ni.state = infoField(ci, "cluster_state")
	ni.known, _ = strconv.Atoi(infoField(ci, "cluster_known_nodes"))
	repl, err := cl.Info(ctx, "replication").Result()
	if err != nil {
		return nodeInfo{err: err}
	}
	ni.role = infoField(repl, "role")
	ni.linkUp = infoField(repl, "master_link_status") == "up"
	nodes, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nodeInfo{err: err}
	}
	var masters []string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		// id addr@bus flags master ping pong epoch link slots...
		if len(f) > 8 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
			masters = append(masters, strings.SplitN(f[1], "@", 2)[0])
		}
	}
	ni.masters = strings.Join(sortedCopy(masters), ",")
	return ni
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// waitHealthy waits until every running node reports cluster_state:ok,
// knows every node, and sees the same three masters with slots, and every
// running replica's link is up. It waits on the servers' readiness, not on
// the code under test, and fails with what it saw at the deadline.
func (c *cluster) waitHealthy(within time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(within)
	for {
		seen, ok := c.healthy()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("cluster not healthy after %v:\n%s", within, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) healthy() (string, bool) {
	var b strings.Builder
	ok := true
	var masters string
	for _, s := range c.nodes {
		if s.cmd == nil {
			continue
		}
		ni := c.info(s)
		fmt.Fprintf(&b, "%s: %+v\n", s.addr(), ni)
		switch {
		case ni.err != nil, ni.state != "ok", ni.known != len(c.nodes),
			ni.role == "slave" && !ni.linkUp,
			strings.Count(ni.masters, ",") != 2,
			masters != "" && ni.masters != masters:
			ok = false
		}
		masters = ni.masters
	}
	return b.String(), ok
}

// masterOf returns the node that serves key's slot now, as the cluster says.
func (c *cluster) masterOf(key string) *server {
	c.tb.Helper()
	cl := goredis.NewClusterClient(c.options())
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, sh := range c.shards() {
		for _, r := range sh.slots {
			if r.Start <= slot && slot <= r.End {
				return sh.master
			}
		}
	}
	c.tb.Fatalf("no master serves %q (slot %d)", key, slot)
	return nil
}

// masters returns the masters that serve slots now.
func (c *cluster) masters() []*server {
	var out []*server
	for _, sh := range c.shards() {
		out = append(out, sh.master)
	}
	return out
}

type shard struct {
	master *server
	slots  []goredis.SlotRange
}

// shards returns the shards that serve slots now, as the cluster says.
func (c *cluster) shards() []shard {
	c.tb.Helper()
	cl := goredis.NewClusterClient(c.options())
	defer cl.Close()
	shards, err := cl.ClusterShards(context.Background()).Result()
	if err != nil {
		c.tb.Fatal(err)
	}
	var out []shard
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue
		}
		for _, n := range sh.Nodes {
			if n.Role != "master" || n.Health != "online" {
				continue
			}
			for _, s := range c.nodes {
				if s.port == int(n.Port) {
					out = append(out, shard{master: s, slots: sh.Slots})
				}
			}
		}
	}
	return out
}
