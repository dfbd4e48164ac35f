package release

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetcast/autoscaler/internal/dockertest"
)

// requireEnv makes a missing cross compiler, qemu or objdump fail the
// tests rather than skip them (.ci/run sets it).
const requireEnv = "FLEETCAST_REQUIRE_RELEASE"

// glibcFloor is the oldest glibc the agent runs on: Rocky and RHEL 8's.
var glibcFloor = [3]int{2, 28, 0}

// version is the release's version in these tests.
const version = "v0.0.0-test"

// sysroot is where Debian's libc6-arm64-cross keeps AArch64's glibc, for
// qemu-aarch64-static -L.
const sysroot = "/usr/aarch64-linux-gnu"

// arches are the release's architectures: their C compiler here and their
// glibc's base symbol version.
var arches = []struct{ arch, cc, base string }{
	{"amd64", "gcc", "GLIBC_2.2.5"},
	{"arm64", "aarch64-linux-gnu-gcc", "GLIBC_2.17"},
}

// onAMD64 skips a test off linux/amd64, where the release is made here
// (fails it where requireEnv is set).
func onAMD64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		if os.Getenv(requireEnv) != "" {
			t.Fatalf("the release's tests build on linux/amd64 (%s is set)", requireEnv)
		}
		t.Skip("the release is made on linux/amd64 here")
	}
}

// shim builds testdata/start-shim.c for arch and returns its path: a
// library to preload that fails a program whose start passes glibc no
// init function.
func shim(t *testing.T, dir, cc, base string) string {
	t.Helper()
	out := filepath.Join(dir, "start-shim-"+cc+".so")
	args := []string{"-O2", "-shared", "-fPIC", "-DBASE=\"" + base + "\"", "-o", out, "testdata/start-shim.c", "-ldl"}
	if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, msg)
	}
	return out
}

// need skips the test where a command is missing (fails it where
// requireEnv is set).
func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			if os.Getenv(requireEnv) != "" {
				t.Fatalf("%s is needed (%s is set): apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static binutils", c, requireEnv)
			}
			t.Skipf("%s not found", c)
		}
	}
}

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseErr  error
)

// release runs release.sh once for the package's tests and returns the
// directory it wrote.
func release(t *testing.T) string {
	t.Helper()
	need(t, "gcc", "aarch64-linux-gnu-gcc", "qemu-aarch64-static", "objdump", "tar", "sha256sum")
	onAMD64(t)
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetcast-release")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = dir
		cmd := exec.Command("bash", "release.sh")
		cmd.Env = append(os.Environ(), "OUT="+dir, "VERSION="+version)
		if out, err := cmd.CombinedOutput(); err != nil {
			releaseErr = fmt.Errorf("release.sh: %v\n%s", err, out)
		}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseDir != "" {
		os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// glibcVersions are the glibc symbol versions objdump -T finds a binary
// asking for, and the symbols asking for each.
func glibcVersions(t *testing.T, bin string) map[string][]string {
	t.Helper()
	out, err := exec.Command("objdump", "-T", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump -T %s: %v\n%s", bin, err, out)
	}
	versions := map[string][]string{}
	re := regexp.MustCompile(`\((GLIBC_[0-9.]+)\)\s+(\S+)$`)
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			versions[m[1]] = append(versions[m[1]], m[2])
		}
	}
	return versions
}

// parseGlibc is GLIBC_2.3.4's (2, 3, 4).
func parseGlibc(v string) [3]int {
	parts := strings.Split(strings.TrimPrefix(v, "GLIBC_"), ".")
	var n [3]int
	for i := 0; i < 3 && i < len(parts); i++ {
		n[i], _ = strconv.Atoi(parts[i])
	}
	return n
}

// newer reports whether version a is after b.
func newer(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// needed is the shared libraries objdump -p says bin needs.
func needed(t *testing.T, bin string) []string {
	t.Helper()
	out, err := exec.Command("objdump", "-p", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump -p %s: %v\n%s", bin, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "NEEDED" {
			libs = append(libs, f[1])
		}
	}
	return libs
}

// runBin runs a release binary for arch: natively for amd64, under
// qemu-aarch64-static with AArch64's glibc for arm64.
func runBin(t *testing.T, arch, bin string, args ...string) (int, string) {
	t.Helper()
	return runBinEnv(t, arch, nil, bin, args...)
}

// runBinEnv is runBin with env added to the test's environment (qemu
// hands it to the program).
func runBinEnv(t *testing.T, arch string, env []string, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append([]string{bin}, args...)
	if arch == "arm64" {
		argv = append([]string{"qemu-aarch64-static", "-L", sysroot}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return 0, string(out)
}

// TestRelease: make release's four binaries and their sums. The
// controller's have no dynamic dependency; the agent's ask for no glibc
// symbol over 2.28 and load libpthread and libdl, where glibc 2.28 keeps
// what they call; every binary runs (arm64's under qemu), the agent
// reaching NVML's loader (no library here: exit 3, saying so).
func TestRelease(t *testing.T) {
	dir := release(t)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"autoscaler-linux-amd64", "autoscaler-linux-arm64", "autoscaler-agent-linux-amd64", "autoscaler-agent-linux-arm64",
		"fleetcast-" + version + "-linux-amd64.tar.gz", "fleetcast-" + version + "-linux-arm64.tar.gz"}
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q: want sha256sum's SUM  NAME", line)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS says %s for %s; it is %x", sum, name, got)
		}
		listed = append(listed, name)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %v; want %v", listed, want)
	}

	for _, a := range arches {
		arch := a.arch
		t.Run(arch, func(t *testing.T) {
			ctl := filepath.Join(dir, "autoscaler-linux-"+arch)
			if libs := needed(t, ctl); len(libs) > 0 {
				t.Errorf("%s needs %v; want a static binary", filepath.Base(ctl), libs)
			}
			if out, _ := exec.Command("objdump", "-j", ".interp", "-s", ctl).CombinedOutput(); strings.Contains(string(out), "Contents of section .interp") {
				t.Errorf("%s has a dynamic loader (.interp): want a static binary", filepath.Base(ctl))
			}
			if code, out := runBin(t, arch, ctl, "version"); code != 0 || !strings.HasPrefix(out, "autoscaler "+version+" (") || !strings.Contains(out, "linux/"+arch) {
				t.Errorf("autoscaler version: exit %d: %q", code, out)
			}

			agent := filepath.Join(dir, "autoscaler-agent-linux-"+arch)
			highest, highestName := [3]int{}, ""
			for v, syms := range glibcVersions(t, agent) {
				if !regexp.MustCompile(`^GLIBC_[0-9]+(\.[0-9]+)*$`).MatchString(v) {
					t.Errorf("%s asks for %s (%s): not a glibc release's version", filepath.Base(agent), v, strings.Join(syms, ", "))
				}
				n := parseGlibc(v)
				if newer(n, highest) {
					highest, highestName = n, v
				}
				if newer(n, glibcFloor) {
					t.Errorf("%s asks for %s (%s): over glibc %d.%d; pin it in glibc-compat.h", filepath.Base(agent), v, strings.Join(syms, ", "), glibcFloor[0], glibcFloor[1])
				}
			}
			t.Logf("%s: highest glibc symbol version %s", filepath.Base(agent), highestName)
			if highestName == "" {
				t.Errorf("%s asks for no glibc symbol: is it linked dynamically?", filepath.Base(agent))
			}
			libs := needed(t, agent)
			for _, lib := range []string{"libc.so.6", "libpthread.so.0", "libdl.so.2"} {
				if !slices.Contains(libs, lib) {
					t.Errorf("%s needs %v; want %s among them", filepath.Base(agent), libs, lib)
				}
			}
			if code, out := runBin(t, arch, agent, "version"); code != 0 || !strings.HasPrefix(out, "autoscaler-agent "+version+" (") || !strings.Contains(out, "linux/"+arch) {
				t.Errorf("autoscaler-agent version: exit %d: %q", code, out)
			}
			// Its start hands glibc an init function, as glibc 2.28 needs
			// to run the constructors.
			preload := "LD_PRELOAD=" + shim(t, t.TempDir(), a.cc, a.base)
			if code, out := runBinEnv(t, arch, []string{preload}, agent, "version"); code != 0 || strings.Contains(out, "cannot be preloaded") {
				t.Errorf("autoscaler-agent version with start-shim.so: exit %d (42: its start passes no init function): %s", code, out)
			}
			tmp := t.TempDir()
			token := filepath.Join(tmp, "credential")
			os.WriteFile(token, []byte("x"), 0o600)
			code, out := runBin(t, arch, agent, "-controller", "http://127.0.0.1:1", "-token-file", token, "-node", "i-1",
				"-socket", filepath.Join(tmp, "a.sock"), "-marker", filepath.Join(tmp, "draining"), "-state", "")
			if code != 3 || !strings.Contains(out, "libnvidia-ml.so") {
				t.Errorf("autoscaler-agent without NVML's library: exit %d: %s; want exit 3 naming libnvidia-ml.so", code, out)
			}
		})
	}

	for _, arch := range []string{"amd64", "arm64"} {
		tarball := filepath.Join(dir, "fleetcast-"+version+"-linux-"+arch+".tar.gz")
		out, err := exec.Command("tar", "-tzf", tarball).CombinedOutput()
		if err != nil {
			t.Fatalf("tar -tzf %s: %v\n%s", tarball, err, out)
		}
		top := "fleetcast-" + version + "-linux-" + arch + "/"
		got := strings.Fields(string(out))
		for _, f := range []string{top + "autoscaler", top + "autoscaler-agent", top + "README.md", top + "LICENSE"} {
			if !slices.Contains(got, f) {
				t.Errorf("%s holds %v; want %s", filepath.Base(tarball), got, f)
			}
		}
	}
}

// TestStartFile: a C program with a constructor, built and linked as
// release.sh builds the agent (the forced include, glibc-start.c,
// --wrap=__libc_start_main, libpthread and libdl named), runs its
// constructor before main on both architectures, hands glibc an init
// function (start-shim.so, preloaded, fails it otherwise: the same program
// with the compiler's own start file shows it does), needs libpthread and
// libdl, and asks for no glibc over 2.28.
func TestStartFile(t *testing.T) {
	need(t, "gcc", "aarch64-linux-gnu-gcc", "qemu-aarch64-static", "objdump")
	onAMD64(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "ctor.c")
	os.WriteFile(src, []byte(`#include <pthread.h>
static int ran, preinits;
__attribute__((constructor)) static void set(void) { ran = 1; }
static void preinit(int argc, char **argv, char **envp) { (void)argc; (void)argv; (void)envp; preinits++; }
__attribute__((section(".preinit_array"), used)) static void (*const preinit_entry)(int, char **, char **) = preinit;
static void *work(void *p) { return p; }
int main(void) {
	pthread_t th;
	if (pthread_create(&th, 0, work, 0) != 0 || pthread_join(th, 0) != 0) return 3;
	if (preinits != 1) return 4;
	return ran ? 0 : 2;
}
`), 0o644)
	for _, a := range arches {
		// As release.sh links the agent.
		libs := []string{"-Wl,--no-as-needed"}
		for _, lib := range []string{"libpthread.so.0", "libdl.so.2"} {
			out, err := exec.Command(a.cc, "-print-file-name="+lib).Output()
			if err != nil {
				t.Fatal(err)
			}
			libs = append(libs, strings.TrimSpace(string(out)))
		}
		bin := filepath.Join(dir, "ctor-"+a.arch)
		args := append([]string{"-O2", "-include", "glibc/glibc-compat.h", "-o", bin, src, "glibc/glibc-start.c", "-Wl,--wrap=__libc_start_main"}, libs...)
		if out, err := exec.Command(a.cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", a.cc, args, err, out)
		}
		preload := "LD_PRELOAD=" + shim(t, dir, a.cc, a.base)
		if code, out := runBinEnv(t, a.arch, []string{preload}, bin); code != 0 || strings.Contains(out, "cannot be preloaded") {
			t.Errorf("%s: exit %d (2: its constructor did not run; 4: its preinit_array ran other than once; 42: no init function reached glibc): %s", a.arch, code, out)
		}
		for v, syms := range glibcVersions(t, bin) {
			if newer(parseGlibc(v), glibcFloor) {
				t.Errorf("%s: asks for %s (%s)", a.arch, v, strings.Join(syms, ", "))
			}
		}
		if libs := needed(t, bin); !slices.Contains(libs, "libpthread.so.0") || !slices.Contains(libs, "libdl.so.2") {
			t.Errorf("%s: needs %v; want libpthread.so.0 and libdl.so.2, where glibc 2.28 keeps the pinned functions", a.arch, libs)
		}

		// The shim can fail: with the compiler's start file (glibc 2.34's
		// crt1, no init function) the same program exits 42 under it.
		plain := filepath.Join(dir, "plain-"+a.arch)
		if out, err := exec.Command(a.cc, "-O2", "-o", plain, src, "-lpthread").CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", a.cc, err, out)
		}
		if _, ok := glibcVersions(t, plain)["GLIBC_2.34"]; !ok {
			t.Logf("%s: this toolchain's start file predates glibc 2.34 (it passes an init function): the shim's own check is skipped", a.arch)
			continue
		}
		if code, out := runBinEnv(t, a.arch, []string{preload}, plain); code != 42 {
			t.Errorf("%s: the program with the compiler's start file exits %d under start-shim.so; want 42 (no init function): %s", a.arch, code, out)
		}
	}
}

// TestImage: make image's controller image, from scratch, started under
// Docker with a config for the simulated cloud, answers /healthz, as the
// unprivileged user it is built with, its state in its volume.
func TestImage(t *testing.T) {
	dockertest.Require(t)
	dir := release(t)
	tag := fmt.Sprintf("fleetcast-test/autoscaler:%d", time.Now().UnixNano())
	image, tagVersion, _ := strings.Cut(tag, ":")
	cmd := exec.Command("bash", "image.sh")
	cmd.Env = append(os.Environ(), "OUT="+dir, "VERSION="+tagVersion, "IMAGE="+image, "ARCH=amd64")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("image.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	if user := dockertest.Run(t, "image", "inspect", "-f", "{{.Config.User}}", tag); user != "65532:65532" {
		t.Errorf("the image runs as %q; want 65532:65532", user)
	}

	// The local example, listening beyond the container's loopback.
	conf := t.TempDir()
	local, err := os.ReadFile("../../examples/local.hcl")
	if err != nil {
		t.Fatal(err)
	}
	fleet := strings.Replace(string(local), `listen        = "127.0.0.1:8790"`, `listen        = "0.0.0.0:8790"`+"\n  insecure      = true", 1)
	fleet = strings.Replace(fleet, `state_dir     = "./fleetcast-state"`, `state_dir     = "/var/lib/fleetcast"`, 1)
	if fleet == string(local) || !strings.Contains(fleet, "insecure") || !strings.Contains(fleet, "/var/lib/fleetcast") {
		t.Fatal("examples/local.hcl's controller block changed: update this test's edits")
	}
	os.WriteFile(filepath.Join(conf, "fleet.hcl"), []byte(fleet), 0o644)
	name := strings.NewReplacer("/", "-", ":", "-").Replace(tag)
	dockertest.Run(t, "run", "-d", "--name", name, "-v", conf+":/etc/fleetcast:ro", tag)
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", "-v", name).Run() })
	ip := dockertest.Run(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
	url := "http://" + ip + ":8790/healthz"
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", "--tail", "30", name).CombinedOutput()
			t.Fatalf("GET %s: %v\n%s", url, err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if running := dockertest.Run(t, "inspect", "-f", "{{.State.Running}}", name); running != "true" {
		t.Errorf("the controller's container is not running")
	}
}
