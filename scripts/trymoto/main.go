// Command trymoto is the AWS side of scripts/try-moto.sh: it makes on a
// local moto_server what examples/terraform/aws makes on AWS, reads the
// groups back, and pushes pending demand to a running controller, so that
// the script needs nothing but Go and moto_server (no AWS CLI, no curl).
//
//	trymoto free-port                         a free TCP port on 127.0.0.1
//	trymoto wait URL PID                      wait (60s) until URL answers HTTP, while process PID lives
//	trymoto create                            make the example fleet (internal/mototest)
//	trymoto unchanged                         fail unless the groups are as made and nothing was launched
//	trymoto local-config SRC DIR              copy config SRC into DIR, pointing at a CA, certificate and secrets made there; print its path
//	trymoto demand API TOKEN_FILE POOL GPUS CA_FILE   push pending demand over HTTPS (waits 60s for the API)
//	trymoto wait-scaled TIMEOUT               wait until a group's desired capacity rose
//
// The AWS calls go to AWS_ENDPOINT_URL, which must be set: trymoto never
// creates anything on AWS itself.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/fleetcast/autoscaler/internal/mototest"
	"github.com/fleetcast/autoscaler/internal/testpki"
)

// waitFor bounds the waits for a server to answer.
const waitFor = 60 * time.Second

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "trymoto:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("want a command: free-port, wait, create, unchanged, local-config, demand or wait-scaled")
	}
	cmd, args := args[0], args[1:]
	want := map[string]int{"free-port": 0, "wait": 2, "create": 0, "unchanged": 0, "local-config": 2, "demand": 5, "wait-scaled": 1}
	n, ok := want[cmd]
	switch {
	case !ok:
		return fmt.Errorf("unknown command %q", cmd)
	case len(args) != n:
		return fmt.Errorf("%s takes %d argument(s), got %d", cmd, n, len(args))
	}
	switch cmd {
	case "free-port":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		return nil
	case "wait":
		pid, err := strconv.Atoi(args[1])
		if err != nil {
			return fmt.Errorf("PID %q: want a process id", args[1])
		}
		return waitHTTP(args[0], pid)
	case "demand":
		gpus, err := strconv.Atoi(args[3])
		if err != nil {
			return fmt.Errorf("GPUS %q: want a whole number", args[3])
		}
		return pushDemand(args[0], args[1], args[2], gpus, args[4])
	case "local-config":
		src, err := os.ReadFile(args[0])
		if err != nil {
			return err
		}
		conf, _, err := testpki.LocalConfig(string(src), args[1])
		if err != nil {
			return err
		}
		fmt.Println(conf)
		return nil
	}
	ec, as, err := clients(ctx)
	if err != nil {
		return err
	}
	switch cmd {
	case "create":
		if err := mototest.CreateExample(ctx, ec, as); err != nil {
			return err
		}
		for _, lt := range mototest.ExampleTemplates {
			fmt.Printf("    launch template     %-28s %s\n", lt.Name, lt.InstanceType)
		}
		for _, g := range mototest.ExampleGroups {
			fmt.Printf("    auto scaling group  %-28s pool %-18s launch template %s, min %d, max %d, desired %d\n",
				g.Name, g.Pool, g.LaunchTemplate, g.Min, g.Max, g.Desired)
		}
		return nil
	case "unchanged":
		return unchanged(ctx, ec, as)
	default: // wait-scaled
		d, err := time.ParseDuration(args[0])
		if err != nil {
			return fmt.Errorf("TIMEOUT %q: %w", args[0], err)
		}
		return waitScaled(ctx, as, d)
	}
}

// clients are the EC2 and Auto Scaling clients for AWS_ENDPOINT_URL.
func clients(ctx context.Context) (*ec2.Client, *autoscaling.Client, error) {
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		return nil, nil, errors.New("AWS_ENDPOINT_URL is not set: trymoto talks to a local moto_server, never to AWS itself")
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"))
	if err != nil {
		return nil, nil, fmt.Errorf("loading the AWS config: %w", err)
	}
	return ec2.NewFromConfig(cfg), autoscaling.NewFromConfig(cfg), nil
}

// waitHTTP waits until url answers HTTP at all, while the process pid
// (the server's) lives.
func waitHTTP(url string, pid int) error {
	deadline := time.Now().Add(waitFor)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("the server (process %d) exited before %s answered", pid, url)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %s: %w", url, waitFor, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// desired returns each example group's desired capacity.
func desired(ctx context.Context, as *autoscaling.Client) (map[string]int32, error) {
	var names []string
	for _, g := range mototest.ExampleGroups {
		names = append(names, g.Name)
	}
	out, err := as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: names})
	if err != nil {
		return nil, fmt.Errorf("DescribeAutoScalingGroups: %w", err)
	}
	got := map[string]int32{}
	for _, g := range out.AutoScalingGroups {
		got[aws.ToString(g.AutoScalingGroupName)] = aws.ToInt32(g.DesiredCapacity)
	}
	for _, name := range names {
		if _, ok := got[name]; !ok {
			return nil, fmt.Errorf("auto scaling group %s is gone", name)
		}
	}
	return got, nil
}

// unchanged fails unless every group has the desired capacity it was made
// with and no instance carries a Fleetcast launch key (none was run).
func unchanged(ctx context.Context, ec *ec2.Client, as *autoscaling.Client) error {
	got, err := desired(ctx, as)
	if err != nil {
		return err
	}
	var changed []string
	for _, g := range mototest.ExampleGroups {
		if got[g.Name] != g.Desired {
			changed = append(changed, fmt.Sprintf("%s: desired capacity %d -> %d", g.Name, g.Desired, got[g.Name]))
		}
	}
	out, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"fleetcast/launch-key"}}}})
	if err != nil {
		return fmt.Errorf("DescribeInstances: %w", err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			changed = append(changed, "instance "+aws.ToString(in.InstanceId)+" was launched")
		}
	}
	if len(changed) > 0 {
		return fmt.Errorf("changed: %s", strings.Join(changed, "; "))
	}
	fmt.Println("    unchanged: every group has the desired capacity it was made with, and no instance was launched")
	return nil
}

// waitScaled waits until some group's desired capacity is above the one it
// was made with, and says which.
func waitScaled(ctx context.Context, as *autoscaling.Client, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := desired(ctx, as)
		if err != nil {
			return err
		}
		var rose []string
		for _, g := range mototest.ExampleGroups {
			if got[g.Name] > g.Desired {
				rose = append(rose, fmt.Sprintf("%s: desired capacity %d -> %d", g.Name, g.Desired, got[g.Name]))
			}
		}
		if len(rose) > 0 {
			for _, r := range rose {
				fmt.Println("    scaled out:", r)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no group's desired capacity rose within %s: %v", timeout, got)
		}
		time.Sleep(time.Second)
	}
}

// pushDemand posts pending demand for a pool to the controller's API with
// the token in tokenFile, waiting for the controller to write the file and
// answer.
func pushDemand(api, tokenFile, pool string, gpus int, caFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("the controller's CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	body, err := json.Marshal(map[string]any{"source": "try-moto", "pending": []map[string]any{{"pool": pool, "gpus": gpus}}})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(waitFor)
	for {
		err := postDemand(client, api, tokenFile, body)
		if err == nil {
			fmt.Printf("    pushed: %d GPUs pending in %s\n", gpus, pool)
			return nil
		}
		var refused *refusedError
		if errors.As(err, &refused) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// refusedError is the API's refusal of a push: retrying will not help.
type refusedError struct {
	status int
	body   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the controller refused the demand: HTTP %d: %s", e.status, e.body)
}

func postDemand(client *http.Client, api, tokenFile string, body []byte) error {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("the controller's API token: %w", err)
	}
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(api, "/")+"/v1/demand", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("pushing demand to %s: %w", api, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &refusedError{status: resp.StatusCode, body: strings.TrimSpace(string(msg))}
	}
	return nil
}
