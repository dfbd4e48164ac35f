// Command etcdmember is one etcd member for the project's end-to-end tests,
// built from the same module as the controller
// (go.etcd.io/etcd/server/v3/embed): the tests run three of them as
// containers built from scratch.
//
//	etcdmember -name e1 -data /data -client http://0.0.0.0:2379 -advertise-client http://e1:2379 \
//	  -peer http://0.0.0.0:2380 -advertise-peer http://e1:2380 -cluster e1=http://e1:2380,e2=http://e2:2380
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	name := flag.String("name", "default", "the member's name")
	data := flag.String("data", "/data", "the data directory")
	client := flag.String("client", "http://0.0.0.0:2379", "the URL to serve clients on")
	advClient := flag.String("advertise-client", "", "the client URL the others reach (default: -client)")
	peer := flag.String("peer", "http://0.0.0.0:2380", "the URL to serve peers on")
	advPeer := flag.String("advertise-peer", "", "the peer URL the others reach (default: -peer)")
	cluster := flag.String("cluster", "", "the initial cluster, NAME=PEER_URL,... (default: this member alone)")
	flag.Parse()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = *name, *data, "warn"
	must := func(s string) []url.URL {
		u, err := url.Parse(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcdmember: %q: %v\n", s, err)
			os.Exit(2)
		}
		return []url.URL{*u}
	}
	if *advClient == "" {
		*advClient = *client
	}
	if *advPeer == "" {
		*advPeer = *peer
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = must(*client), must(*advClient)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = must(*peer), must(*advPeer)
	cfg.InitialCluster = *cluster
	if *cluster == "" {
		cfg.InitialCluster = *name + "=" + *advPeer
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("etcdmember: ready")
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "etcdmember: not ready after 2m")
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	select {
	case <-stop:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}
