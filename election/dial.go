package election

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/fleetcast/autoscaler/fleet"
)

// dialTimeout bounds the first connection to etcd.
const dialTimeout = 5 * time.Second

// Dial makes a client of the etcd members ha names, over TLS with its
// files where it gives them. The client connects lazily; its requests fail
// while no member answers.
func Dial(ha fleet.HASettings) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: ha.Etcd, DialTimeout: dialTimeout, Logger: zap.NewNop(),
		// A connection that dies (a partition) is found within seconds,
		// and dialled again within seconds of the network's return, not
		// after gRPC's default back-off of up to two minutes: a replica
		// cut off campaigns again as soon as it can.
		DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 3 * time.Second,
		})}}
	if ha.TLSCAFile != "" || ha.TLSCertFile != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if ha.TLSCAFile != "" {
			pem, err := os.ReadFile(ha.TLSCAFile)
			if err != nil {
				return nil, fmt.Errorf("controller.ha.tls.ca: %w", err)
			}
			t.RootCAs = x509.NewCertPool()
			if !t.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("controller.ha.tls.ca: %s holds no PEM certificate", ha.TLSCAFile)
			}
		}
		if ha.TLSCertFile != "" {
			cert, err := tls.LoadX509KeyPair(ha.TLSCertFile, ha.TLSKeyFile)
			if err != nil {
				return nil, fmt.Errorf("controller.ha.tls: the client certificate and key: %w", err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = t
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller.ha.etcd %v: %w", ha.Etcd, err)
	}
	return c, nil
}
