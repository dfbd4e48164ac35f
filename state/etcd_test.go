package state

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// openEtcd opens the records under prefix in etcd.
func openEtcd(t testing.TB, c *clientv3.Client, prefix string, fence Fence) *Store {
	t.Helper()
	s, err := OpenEtcd(context.Background(), EtcdOptions{Client: c, Prefix: prefix, Fence: fence})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
