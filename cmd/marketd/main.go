// Command marketd is the one binary of the market screener service: the
// public api, the asynq worker and scheduler, migrations and the operator
// CLI. Run "marketd help" for the sub-commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/marketscreener/market/cmd/marketd/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startPprof()
	m := &app.Main{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(m.Run(ctx, os.Args[1:]))
}
