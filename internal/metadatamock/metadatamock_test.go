package metadatamock_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/metadatamock"
)

// get fetches a metadata path from the mock, with token when not empty.
func get(t *testing.T, endpoint, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, endpoint+"/latest/meta-data/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-aws-ec2-metadata-token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func token(t *testing.T, endpoint string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, endpoint+"/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT /latest/api/token: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("PUT /latest/api/token: %d %q", resp.StatusCode, body)
	}
	return string(body)
}

func TestStartServesTheFlagsGiven(t *testing.T) {
	const when, notice = "2030-01-02T03:04:05Z", "2030-01-02T03:00:00Z"
	endpoint := metadatamock.Start(t, "spot", "--imdsv2", "--action", "hibernate", "--time", when, "--rebalance-rec-time", notice)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %q, want http://127.0.0.1:PORT", endpoint)
	}
	if code, _ := get(t, endpoint, "spot/instance-action", ""); code != http.StatusUnauthorized {
		t.Errorf("--imdsv2 and no token: status %d, want 401", code)
	}
	tok := token(t, endpoint)
	for path, want := range map[string]string{
		"spot/instance-action":             `"action": "hibernate"`,
		"spot/termination-time":            when,
		"events/recommendations/rebalance": `"noticeTime": "` + notice + `"`,
	} {
		code, body := get(t, endpoint, path, tok)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 200 and %s", path, code, body, want)
		}
	}
}

func TestStartKillsTheMockWhenTheTestEnds(t *testing.T) {
	var endpoint string
	t.Run("inner", func(t *testing.T) {
		endpoint = metadatamock.Start(t, "spot")
	})
	if endpoint == "" {
		t.Fatal("inner test did not start the mock")
	}
	if resp, err := http.Get(endpoint + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("the mock at %s still answers after its test ended", endpoint)
	}
}

func TestStartsAreIndependent(t *testing.T) {
	a := metadatamock.Start(t, "spot", "--mock-delay-sec", "3600")
	b := metadatamock.Start(t, "spot")
	if a == b {
		t.Fatalf("two mocks on one endpoint %s", a)
	}
	if code, _ := get(t, a, "spot/instance-action", ""); code != http.StatusNotFound {
		t.Errorf("delayed mock: status %d, want 404", code)
	}
	if code, _ := get(t, b, "spot/instance-action", ""); code != http.StatusOK {
		t.Errorf("mock without delay: status %d, want 200", code)
	}
}

// fatalTB records the message of Fatal and ends the goroutine, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestStartFailsWithTheMocksLogWhenItExits(t *testing.T) {
	f := &fatalTB{TB: t}
	done := make(chan string)
	go func() {
		defer func() { done <- f.msg }()
		metadatamock.Start(f, "spot", "--action", "reboot")
		f.msg = "Start returned"
	}()
	select {
	case msg := <-done:
		// The mock's own validation message must be in the failure.
		if !strings.Contains(msg, "exited before answering") || !strings.Contains(msg, `Invalid CLI input "reboot" for flag action`) {
			t.Errorf("Start's failure: %s\nwant the mock's exit and its log, which names the bad action", msg)
		}
	case <-time.After(metadatamock.ReadyTimeout + 5*time.Second):
		t.Fatal("Start did not fail on a mock that cannot start")
	}
}

// TestStartIgnoresTheMachinesMockConfig: neither a config file in HOME nor
// AEMM_* variables reach the mock.
func TestStartIgnoresTheMachinesMockConfig(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "aemm-config.json"), []byte(`{"spot":{"action":"stop"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("AEMM_MOCK_DELAY_SEC", "3600")
	t.Setenv("AEMM_SPOT_TIME", "2030-01-02T03:04:05Z")
	endpoint := metadatamock.Start(t, "spot")
	code, body := get(t, endpoint, "spot/instance-action", "")
	if code != http.StatusOK || !strings.Contains(body, `"terminate"`) || strings.Contains(body, "2030-") {
		t.Errorf("spot/instance-action: %d %q, want 200 and the defaults (terminate, now + 2 min)", code, body)
	}
}
