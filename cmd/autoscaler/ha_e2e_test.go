package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"github.com/fleetcast/autoscaler/internal/dockertest"
	"github.com/fleetcast/autoscaler/internal/mototest"
)

// scratchImage builds an image from scratch holding the executable bin
// (and, for one linked dynamically, the libraries ldd names), started as
// ENTRYPOINT [bin].
func scratchImage(t *testing.T, tag, bin string) {
	t.Helper()
	ctx := t.TempDir()
	files := []string{bin}
	if out, err := exec.Command("ldd", bin).CombinedOutput(); err == nil {
		for _, m := range regexp.MustCompile(`(/\S+\.so[.\d]*)`).FindAllString(string(out), -1) {
			files = append(files, m)
		}
	}
	var docker strings.Builder
	docker.WriteString("FROM scratch\n")
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(ctx, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := f
		if i == 0 {
			dst = "/bin/" + filepath.Base(bin)
		}
		fmt.Fprintf(&docker, "COPY %s %s\n", name, dst)
	}
	fmt.Fprintf(&docker, "LABEL fleetcast-test=ha\nENTRYPOINT [\"/bin/%s\"]\n", filepath.Base(bin))
	os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(docker.String()), 0o644)
	dockertest.Run(t, "build", "-q", "-t", tag, ctx)
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
}

// haCluster is three etcd members and three controller replicas as
// containers, the replicas driving an AWS account on a moto_server of
// the host's.
type haCluster struct {
	t          *testing.T
	id         string
	etcdNet    string
	ctl        string
	conf       string
	motoURL    string
	asg        *autoscaling.Client
	replicaIPs map[string]string
}

// TestHAContainers: three controller replicas and three etcd members, each
// a container built from scratch from the project's binaries, the
// replicas driving an AWS account on moto. The first leader is killed
// between a launch's journal write and its call (its fault hook); a new
// leader runs a cycle within the lease's TTL and a second, and the group
// holds exactly the nodes the demand needs. Then the new leader is cut off
// from etcd (docker network disconnect), not from the cloud: it stops
// leading within its TTL, and the third replica leads. Last, the network
// heals and the third is killed (docker kill): the second leads again.
func TestHAContainers(t *testing.T) {
	dockertest.Require(t)
	moto := mototest.Require(t)
	if testing.Short() {
		t.Skip("builds images and runs six containers")
	}
	sweep(t)
	c := &haCluster{t: t, replicaIPs: map[string]string{}}
	b := make([]byte, 4)
	rand.Read(b)
	c.id = "fcha-" + hex.EncodeToString(b)
	dir := t.TempDir()

	// The images: the controller (linked with glibc: its libraries go in
	// with it) and an etcd member, both from this module.
	bin := filepath.Join(dir, "autoscaler")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_CFLAGS=-Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the controller: %v\n%s", err, out)
	}
	member := filepath.Join(dir, "etcdmember")
	build = exec.Command("go", "build", "-o", member, "../../internal/etcdtest/etcdmember")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the etcd member: %v\n%s", err, out)
	}
	c.ctl = c.id + "-controller"
	scratchImage(t, c.ctl, bin)
	scratchImage(t, c.id+"-etcd", member)

	// Two networks: etcd's, which nothing else reaches, and the cloud's,
	// from which moto_server is reached at the gateway, where it listens.
	c.etcdNet = c.id + "-etcd"
	cloudNet := c.id + "-cloud"
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "name="+c.id).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
		exec.Command("docker", "network", "rm", c.etcdNet, cloudNet).Run()
	})
	dockertest.Run(t, "network", "create", "--internal", "--label", "fleetcast-test=ha", c.etcdNet)
	dockertest.Run(t, "network", "create", "--label", "fleetcast-test=ha", cloudNet)
	gateway := dockertest.Run(t, "network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", cloudNet)
	port := freePort(t, gateway)
	motoCmd := exec.Command(moto, "-H", gateway, "-p", port)
	if err := motoCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { motoCmd.Process.Kill(); motoCmd.Wait() })
	local := "http://" + gateway + ":" + port
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(local + "/moto-api/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("moto_server did not start")
		}
	}
	ec, as := motoAccount(t, local)
	if err := mototest.CreateExample(context.Background(), ec, as); err != nil {
		t.Fatal(err)
	}
	c.asg, c.motoURL = as, local

	// etcd: three members.
	var cluster []string
	for _, m := range []string{"e1", "e2", "e3"} {
		cluster = append(cluster, m+"=http://"+m+":2380")
	}
	for _, m := range []string{"e1", "e2", "e3"} {
		dockertest.Run(t, "run", "-d", "--name", c.id+"-"+m, "--network", c.etcdNet, "--network-alias", m, c.id+"-etcd",
			"-name", m, "-data", "/data", "-advertise-client", "http://"+m+":2379", "-advertise-peer", "http://"+m+":2380",
			"-cluster", strings.Join(cluster, ","))
	}

	// The controllers' config: the on-demand pool of examples/aws.hcl,
	// and ha on the three members.
	c.conf = filepath.Join(dir, "conf")
	os.MkdirAll(c.conf, 0o755)
	// The first replica is killed by its fault hook at its first launch;
	// it starts alone, so that it leads.
	c.startReplica("c1", "FLEETCAST_CRASH_AFTER_JOURNAL=launch")
	first := c.waitLeader(60*time.Second, "c1")
	c.startReplica("c2")
	c.startReplica("c3")
	c.waitFollower("c2")
	c.waitFollower("c3")

	// A scheduler pushes 16 GPUs of demand to a follower, which forwards
	// it to the leader; the leader journals a launch and dies.
	if code := c.push("c2"); code != http.StatusNoContent {
		t.Fatalf("demand pushed to a follower: %d", code)
	}
	killed := c.waitExit(first, 60*time.Second)
	second := c.waitLeader(10*time.Second, "c2", "c3")
	c.push(second)
	at := c.firstPlanAfter(second, killed, 10*time.Second)
	if took := at.Sub(killed); took > 3*time.Second {
		t.Errorf("%s's first cycle %v after %s was killed; want within the TTL (2s) and a second", second, took, first)
	}
	t.Logf("%s killed at its first launch; %s's first cycle %v after", first, second, at.Sub(killed).Round(time.Millisecond))
	// The group holds what the demand needs: 2 nodes of 8 GPUs.
	time.Sleep(3 * time.Second)
	if n := c.desired("fleetcast-ondemand-a100"); n != 2 {
		t.Errorf("the group's desired capacity is %d after the failover; want 2 (16 GPUs of 8-GPU nodes)", n)
	}

	// The new leader is cut off from etcd, not from the cloud.
	third := "c2"
	if second == "c2" {
		third = "c3"
	}
	// Timed from the command's return: the cut is made by then.
	dockertest.Run(t, "network", "disconnect", c.etcdNet, c.id+"-"+second)
	cut := time.Now()
	c.waitFollower(second)
	if took := time.Since(cut); took > 2500*time.Millisecond {
		t.Errorf("%s, cut off from etcd, stopped leading %v after the cut; want within its TTL (2s)", second, took)
	}
	t.Logf("%s, cut off from etcd, stopped leading %v after the cut", second, time.Since(cut).Round(time.Millisecond))
	c.waitLeader(10*time.Second, third)
	t.Logf("%s leads %v after the cut", third, time.Since(cut).Round(time.Millisecond))
	if n := c.desired("fleetcast-ondemand-a100"); n != 2 {
		t.Errorf("the group's desired capacity is %d after the partition; want 2", n)
	}

	// The partition heals, and the third replica is killed (docker kill:
	// SIGKILL): the healed one leads.
	dockertest.Run(t, "network", "connect", c.etcdNet, c.id+"-"+second)
	c.waitReadsState(second)
	killedAt := time.Now()
	dockertest.Run(t, "kill", c.id+"-"+third)
	c.waitLeader(10*time.Second, second)
	c.push(second)
	at = c.firstPlanAfter(second, killedAt, 10*time.Second)
	if took := at.Sub(killedAt); took > 3*time.Second {
		t.Errorf("%s's first cycle %v after docker kill %s; want within the TTL (2s) and a second", second, took, third)
	}
	t.Logf("docker kill %s; %s's first cycle %v after", third, second, at.Sub(killedAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	if n := c.desired("fleetcast-ondemand-a100"); n != 2 {
		t.Errorf("the group's desired capacity is %d after the last failover; want 2", n)
	}
}

// startReplica runs replica name, on both networks, with env added.
func (c *haCluster) startReplica(name string, env ...string) {
	t := c.t
	conf := fmt.Sprintf(`pool "aws-ondemand-a100" {
  provider       = "aws"
  region         = "us-east-1"
  zones          = ["us-east-1a", "us-east-1b", "us-east-1c"]
  instance_type  = "p4d.24xlarge"
  gpus_per_node  = 8
  capacity       = "on_demand"
  price_per_hour = 32.77
  lead_time      = "9m"
  max            = 16
  aws {
    asg_tag = "fleetcast/pool=aws-ondemand-a100"
  }
}

controller {
  interval  = "1s"
  listen    = "0.0.0.0:8790"
  insecure  = true
  state_dir = "/state"
  ha {
    etcd      = ["http://e1:2379", "http://e2:2379", "http://e3:2379"]
    advertise = "http://%s:8790"
    lease_ttl = "2s"
  }
}
`, c.id+"-"+name)
	if err := os.WriteFile(filepath.Join(c.conf, name+".hcl"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"create", "--name", c.id + "-" + name, "--network", c.id + "-cloud", "-v", c.conf + ":/conf:ro",
		"-e", "FLEETCAST_API_TOKEN=" + strings.Repeat("ab", 24), "-e", "AWS_ENDPOINT_URL=" + c.motoURL,
		"-e", "AWS_ACCESS_KEY_ID=AKIDFLEETCAST", "-e", "AWS_SECRET_ACCESS_KEY=secret", "-e", "AWS_REGION=us-east-1"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(args, c.ctl, "run", "-config", "/conf/"+name+".hcl", "-log-level", "info")
	dockertest.Run(t, args...)
	dockertest.Run(t, "network", "connect", c.etcdNet, c.id+"-"+name)
	dockertest.Run(t, "start", c.id+"-"+name)
	c.replicaIPs[name] = dockertest.Run(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+c.id+"-cloud\").IPAddress}}", c.id+"-"+name)
}

// healthz is replica name's /healthz body, "" if it does not answer.
func (c *haCluster) healthz(name string) string {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + c.replicaIPs[name] + ":8790/healthz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitLeader waits for one of names to lead and returns it.
func (c *haCluster) waitLeader(within time.Duration, names ...string) string {
	c.t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, n := range names {
			if h := c.healthz(n); h != "" && !strings.Contains(h, "follower") {
				return n
			}
		}
	}
	c.t.Fatalf("none of %v leads after %v:\n%s", names, within, c.logs(names...))
	return ""
}

// waitFollower waits for replica name to answer as a follower.
func (c *haCluster) waitFollower(name string) {
	c.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(c.healthz(name), "follower") {
			return
		}
	}
	c.t.Fatalf("%s does not follow:\n%s", name, c.logs(name))
}

// waitReadsState waits for follower name to serve the plan from the
// state: its client reaches etcd again.
func (c *haCluster) waitReadsState(name string) {
	c.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+c.replicaIPs[name]+":8790/v1/plan", nil)
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("ab", 24))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Fleetcast-Served-By"), "follower") {
				return
			}
		}
	}
	c.t.Fatalf("%s does not read the state:\n%s", name, c.logs(name))
}

// waitExit waits for replica name's process to end and returns when it
// did, as Docker saw it.
func (c *haCluster) waitExit(name string, within time.Duration) time.Time {
	c.t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if dockertest.Run(c.t, "inspect", "-f", "{{.State.Running}}", c.id+"-"+name) == "false" {
			at, err := time.Parse(time.RFC3339Nano, dockertest.Run(c.t, "inspect", "-f", "{{.State.FinishedAt}}", c.id+"-"+name))
			if err != nil {
				c.t.Fatal(err)
			}
			return at
		}
	}
	c.t.Fatalf("%s still runs after %v:\n%s", name, within, c.logs(name))
	return time.Time{}
}

// push sends 16 GPUs of pending demand to replica name and returns the
// status.
func (c *haCluster) push(name string) int {
	req, _ := http.NewRequest("POST", "http://"+c.replicaIPs[name]+":8790/v1/demand",
		bytes.NewBufferString(`{"source": "sched", "pending": [{"pool": "aws-ondemand-a100", "gpus": 16}]}`))
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("ab", 24))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// firstPlanAfter is the time of the first plan of replica name made after
// t, read from its API.
func (c *haCluster) firstPlanAfter(name string, t time.Time, within time.Duration) time.Time {
	c.t.Helper()
	var first time.Time
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+c.replicaIPs[name]+":8790/v1/plan", nil)
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("ab", 24))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		var p struct {
			At time.Time `json:"at"`
		}
		json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if p.At.After(t) && (first.IsZero() || p.At.Before(first)) {
			first = p.At
			return first
		}
	}
	c.t.Fatalf("%s made no plan after %v:\n%s", name, t, c.logs(name))
	return first
}

// desired is the Auto Scaling group's desired capacity.
func (c *haCluster) desired(group string) int {
	c.t.Helper()
	out, err := c.asg.DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		c.t.Fatalf("group %s: %v", group, err)
	}
	return int(aws.ToInt32(out.AutoScalingGroups[0].DesiredCapacity))
}

// logs are the replicas' logs, for a failure.
func (c *haCluster) logs(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		out, _ := exec.Command("docker", "logs", "--tail", "40", c.id+"-"+n).CombinedOutput()
		fmt.Fprintf(&b, "--- %s\n%s\n", n, out)
	}
	return b.String()
}

// sweep removes what an earlier run of the test left, killed before its
// clean-up ran (a go test timeout): its containers, networks and images.
func sweep(t *testing.T) {
	t.Helper()
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "name=fcha-"},
		{"network", "ls", "-q", "--filter", "label=fleetcast-test=ha"},
		{"images", "-q", "--filter", "label=fleetcast-test=ha"},
	} {
		out, _ := exec.Command("docker", args...).Output()
		ids := strings.Fields(string(out))
		if len(ids) == 0 {
			continue
		}
		rm := map[string][]string{"ps": {"rm", "-f"}, "network": {"network", "rm"}, "images": {"rmi", "-f"}}[args[0]]
		exec.Command("docker", append(rm, ids...)...).Run()
	}
}

// freePort is a port on host that was free a moment ago.
func freePort(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
