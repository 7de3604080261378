package e2e_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/marketscreener/market/cmd/marketd/app"
)

// composeFile is the part of compose.yaml these checks read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		PullPolicy  string            `yaml:"pull_policy"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// TestComposeBuildsOnce: one service builds marketd:local and the others
// run that image without pulling it (five builds and four dangling images
// per `up --build` otherwise). make compose-check counts dangling images.
func TestComposeBuildsOnce(t *testing.T) {
	t.Parallel()
	var builders []string
	for name, s := range readCompose(t).Services {
		if s.Build != nil {
			builders = append(builders, name)
		}
		if s.Image == "marketd:local" && s.Build == nil && s.PullPolicy != "never" {
			t.Errorf("service %s runs marketd:local with pull_policy %q, want never (the image is built, not pulled)", name, s.PullPolicy)
		}
	}
	if len(builders) != 1 {
		t.Errorf("services with build: %v, want exactly one", builders)
	}
}

// TestComposeStartsInOrder: Postgres is healthy only when it answers over
// TCP (the first-start init server listens on the socket only), and
// migrate retries while it is not.
func TestComposeStartsInOrder(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	if hc := strings.Join(c.Services["postgres"].Healthcheck.Test, " "); !strings.Contains(hc, "pg_isready -h 127.0.0.1") {
		t.Errorf("postgres healthcheck %q does not check over TCP (pg_isready -h 127.0.0.1)", hc)
	}
	if cmd := strings.Join(c.Services["migrate"].Command, " "); !strings.Contains(cmd, "--wait") {
		t.Errorf("migrate command %q does not wait for Postgres", cmd)
	}
}

// TestComposeDefaultsAreSafe: the secret key's default is the explicit,
// warned-about demo value, and asynqmon is read-only unless asked.
func TestComposeDefaultsAreSafe(t *testing.T) {
	t.Parallel()
	for name, s := range readCompose(t).Services {
		if s.Image != "marketd:local" {
			continue
		}
		if v := s.Environment["MARKET_SECRET_KEY"]; v != "${MARKET_SECRET_KEY:-"+app.DemoSecretKeyValue+"}" {
			t.Errorf("%s: MARKET_SECRET_KEY %q, want the explicit demo default %s", name, v, app.DemoSecretKeyValue)
		}
		if v := s.Environment["MARKET_ASYNQMON_WRITABLE"]; v != "${MARKET_ASYNQMON_WRITABLE:-false}" {
			t.Errorf("%s: MARKET_ASYNQMON_WRITABLE %q, want read-only by default", name, v)
		}
	}
}

// TestDockerfileGoMatchesGoMod: the build image is the exact Go of go.mod's
// go line (the image builds with GOTOOLCHAIN=local: an older 1.26.x refuses
// go.mod; a cached `golang:1.26` may be one).
func TestDockerfileGoMatchesGoMod(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+\.\d+)$`).FindSubmatch(mod)
	got := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindSubmatch(docker)
	if want == nil || got == nil || string(got[1]) != string(want[1]) {
		t.Fatalf("Dockerfile ARG GO_VERSION %q, go.mod go %q: want the same patch version", got, want)
	}
	if !regexp.MustCompile(`(?m)^FROM golang:\$\{GO_VERSION\}`).Match(docker) {
		t.Fatal("the Dockerfile's build stage is not FROM golang:${GO_VERSION}…")
	}
}
