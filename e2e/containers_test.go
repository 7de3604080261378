package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// TestMissingImageFallsBack: a Docker engine that answers but cannot have
// an image (no registry, as on CI) makes the suite fall back to the local
// services, naming the image, instead of failing.
func TestMissingImageFallsBack(t *testing.T) {
	if !onContainers {
		t.Skip("Docker-only: this run is on the local services")
	}
	t.Parallel()
	img := "market-e2e/never-built:none"
	why := dockerUnavailable(context.Background(), img)
	if !strings.Contains(why, img) {
		t.Fatalf("dockerUnavailable(%s) = %q, want a reason naming the image", img, why)
	}
}

// TestFailedContainerStartIsRemoved: a container that starts but never
// becomes ready is removed, not left running.
func TestFailedContainerStartIsRemoved(t *testing.T) {
	if !onContainers {
		t.Skip("Docker-only: this run is on the local services")
	}
	t.Parallel()
	ctx := context.Background()
	label := fmt.Sprintf("failed-start-%d", time.Now().UnixNano())
	_, _, _, err := startContainers(ctx, map[string]string{"market.e2e": label},
		testcontainers.WithWaitStrategyAndDeadline(3*time.Second, wait.ForLog("a line Postgres never prints")))
	if err == nil {
		t.Fatal("startContainers succeeded with a wait strategy that cannot")
	}
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	res, err := p.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "market.e2e="+label)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Items {
		t.Errorf("container %s (%s) left behind after a failed start", c.ID[:12], c.State)
	}
}
