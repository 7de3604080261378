package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/webhook"
)

// TypeWebhookDispatch fans verdict and alert events out to subscriptions and sends
// the deliveries that are due.
const TypeWebhookDispatch = "webhooks:dispatch"

// Dispatcher defaults.
const (
	// DefaultDeliveryConcurrency is how many sends one worker process runs
	// at once. A hanging receiver holds one slot for at most
	// webhook.Timeout, so healthy subscriptions wait only when more
	// receivers than this hang at once.
	DefaultDeliveryConcurrency = 128
	// DefaultDeliveryLease is how long a claim on a subscription lasts:
	// longer than a send (webhook.Timeout) plus the time to record it.
	DefaultDeliveryLease = 30 * time.Second
	// leaseMargin of a lease is kept free for recording the outcome: a
	// send is cut off this long before its lease ends.
	leaseMargin = 5 * time.Second
	// claimBatch bounds one claim statement.
	claimBatch = 100
	// fanOutBatch bounds one fan-out statement.
	fanOutBatch = 500
	// maxPass bounds one dispatch pass (the task's time-out is 5 min); the
	// next tick goes on.
	maxPass = 4 * time.Minute
	// coalesce is how long a pass with nothing more due waits for further
	// completions before it claims again (fewer empty claims).
	coalesce = 20 * time.Millisecond
)

// NewWebhookDispatchTask builds the dispatch task of one scheduler tick.
func NewWebhookDispatchTask(tick time.Time) *asynq.Task {
	return newTask(TypeWebhookDispatch, struct {
		Tick time.Time `json:"tick"`
	}{tick.UTC()})
}

// WebhookStore is what the dispatcher reads and writes.
type WebhookStore interface {
	FanOut(ctx context.Context, limit int) (int, error)
	DropIneligible(ctx context.Context) (int64, error)
	ClaimDeliveries(ctx context.Context, box *domain.SecretBox, limit int, lease time.Duration) ([]store.Delivery, error)
	RecordDelivery(ctx context.Context, d store.Delivery, outcome domain.DeliveryError, status int, latency, retryAfter time.Duration) (bool, error)
	ReleaseDelivery(ctx context.Context, d store.Delivery) error
	DisableForSecret(ctx context.Context, d store.Delivery) error
	SealedSecrets(ctx context.Context, exceptID string, n int) (map[string][]byte, error)
}

// Dispatcher delivers webhooks. Postgres is the queue and the source of
// truth: the fan-out turns verdict events into deliveries in one
// transaction; a worker leases a subscription (a token and an end time on
// its row) and sends its oldest due delivery, so one subscription has at
// most one delivery in flight and gets its events in order; the outcome is
// recorded only with the lease's token (a worker whose lease ran out
// records nothing) and a send is cut off before its lease ends, so a
// delivery is never sent by two workers at once.
//
// Dispatch is a pass: it keeps claiming while deliveries are due, with at
// most Concurrency sends in flight, and returns when nothing is due or in
// flight. It is safe to call at any time, from any number of goroutines
// and processes (a scheduler tick, a wake-up on a new event): a call while
// a pass runs in this process makes that pass look again and returns.
type Dispatcher struct {
	Store  WebhookStore
	Box    *domain.SecretBox
	Client *http.Client
	Logger *slog.Logger
	// Now stamps the signatures' timestamps (time.Now if nil).
	Now func() time.Time
	// Backoff is the wait before attempt n+1 of a delivery after attempt n
	// failed (default RetryBackoff).
	Backoff func(attempt int) time.Duration
	// Concurrency bounds the sends in flight (DefaultDeliveryConcurrency).
	Concurrency int
	// Lease is the claim's length (DefaultDeliveryLease; at least
	// webhook.Timeout + 2 × 5 s).
	Lease time.Duration

	mu      sync.Mutex
	running bool
	again   bool
	kick    chan struct{}
	// keyProven: a secret opened with this process's MARKET_SECRET_KEY,
	// so a secret that does not open is that row's fault.
	keyProven atomic.Bool
}

// RetryBackoff is the retry schedule of a failed delivery: 10 s, 30 s,
// 1 min, 5 min, 15 min, then every hour, until it succeeds or the
// subscription is disabled (10 consecutive failures, about 4 h 20 min).
func RetryBackoff(attempt int) time.Duration {
	steps := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute}
	if attempt-1 < len(steps) {
		return steps[max(attempt-1, 0)]
	}
	return time.Hour
}

// Register adds the dispatch handler to a worker.
func (d *Dispatcher) Register(w *Worker) {
	w.Handle(TypeWebhookDispatch, asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		_, err := d.Dispatch(ctx)
		return err
	}))
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

func (d *Dispatcher) lease() time.Duration {
	if d.Lease < webhook.Timeout+2*leaseMargin {
		return DefaultDeliveryLease
	}
	return d.Lease
}

// Dispatch fans out every new event and sends every due delivery, and
// returns how many deliveries this call sent. If a pass is already running
// in this process, it asks that pass to look again and returns at once.
func (d *Dispatcher) Dispatch(ctx context.Context) (int, error) {
	d.mu.Lock()
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	if d.running {
		d.again = true
		select {
		case d.kick <- struct{}{}:
		default:
		}
		d.mu.Unlock()
		return 0, nil
	}
	d.running, d.again = true, false
	d.mu.Unlock()
	return d.pass(ctx)
}

// stop ends the pass unless another call asked it to look again.
func (d *Dispatcher) stop(force bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.again && !force {
		d.again = false
		return false
	}
	d.running = false
	return true
}

func (d *Dispatcher) pass(ctx context.Context) (int, error) {
	concurrency := d.Concurrency
	if concurrency <= 0 {
		concurrency = DefaultDeliveryConcurrency
	}
	var (
		deadline = time.Now().Add(maxPass)
		done     = make(chan error, concurrency)
		inflight int
		sent     int
		firstErr error
		prepare  = true
	)
	fail := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	for {
		claiming := firstErr == nil && ctx.Err() == nil && time.Now().Before(deadline)
		if prepare && claiming {
			prepare = false
			fail(d.prepare(ctx))
			continue
		}
		if free := concurrency - inflight; claiming && free > 0 {
			want := min(free, claimBatch)
			t0 := time.Now()
			batch, err := d.Store.ClaimDeliveries(ctx, d.Box, want, d.lease())
			fail(err)
			for _, dl := range batch {
				inflight++
				go func() { done <- d.deliver(ctx, dl, t0) }()
			}
			sent += len(batch)
			if len(batch) == want {
				continue // more may be due
			}
		}
		if inflight == 0 {
			if d.stop(!claiming) {
				return sent, firstErr
			}
			prepare = true
			continue
		}
		// Wait for a send to finish (its subscription's next delivery may
		// be due) or for a wake-up.
		select {
		case err := <-done:
			inflight--
			fail(err)
		case <-d.kick:
			prepare = true
		}
		timer := time.NewTimer(coalesce)
	collect:
		for inflight > 0 {
			select {
			case err := <-done:
				inflight--
				fail(err)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
	}
}

// prepare fans new events out and drops what may no longer be sent.
func (d *Dispatcher) prepare(ctx context.Context) error {
	for {
		n, err := d.Store.FanOut(ctx, fanOutBatch)
		if err != nil {
			return err
		}
		if n < fanOutBatch {
			break
		}
	}
	dropped, err := d.Store.DropIneligible(ctx)
	if dropped > 0 {
		d.logger().Info("webhook deliveries dropped: client suspended or expired, or market no longer in the tier", "count", dropped)
	}
	return err
}

// deliver sends one claimed delivery and records the outcome. It returns
// only a failure to record (a failed send is an outcome).
func (d *Dispatcher) deliver(ctx context.Context, dl store.Delivery, claimedAt time.Time) error {
	log := d.logger().With("webhook_id", dl.WebhookID, "host", webhook.Host(dl.CallbackURL), "event_id", dl.EventID, "attempt", dl.Attempt)
	if dl.SecretErr != nil {
		return d.secretFailure(ctx, dl, log)
	}
	d.keyProven.Store(true)
	// The send must end before the claim does, with time left to record.
	cutoff := claimedAt.Add(d.lease() - leaseMargin)
	if time.Until(cutoff) < webhook.Timeout {
		log.Warn("webhook delivery not sent: too little of its lease was left; it goes out on the next claim")
		return ignoreLost(d.Store.ReleaseDelivery(context.WithoutCancel(ctx), dl))
	}
	sctx, cancel := context.WithDeadline(ctx, cutoff)
	defer cancel()
	e := dl.Event
	var body []byte
	switch {
	case dl.Kind == domain.EventAlertTriggered:
		a := dl.Alert
		body = webhook.AlertBody(dl.EventID, a.AlertID, a.AlertName, a.Market, a.Symbol, a.At, a.Read, a.Sandbox)
	case e.Sandbox:
		body = webhook.SandboxVerdictBody(dl.EventID, e.Market, e.Symbol, string(e.OldVerdict), string(e.NewVerdict), e.OverallScore, e.At, e.ModelVersion)
	default:
		body = webhook.VerdictBody(dl.EventID, e.Market, e.Symbol, string(e.OldVerdict), string(e.NewVerdict), e.OverallScore, e.At, e.ModelVersion)
	}
	sender := webhook.Sender{Client: d.Client, Now: d.Now}
	res := sender.Send(sctx, dl.CallbackURL, webhook.Message{ID: webhook.EventID(dl.EventID), Body: body,
		Secret: dl.Secret, PreviousSecret: dl.PreviousSecret})
	if ctx.Err() != nil {
		// Shutting down: the attempt was ours to abort, not the receiver's
		// failure. It goes out again after the restart.
		return ignoreLost(d.Store.ReleaseDelivery(context.WithoutCancel(ctx), dl))
	}
	obs.Delivery(res.Err.Category, res.Err.Status, time.Since(e.At))
	backoff := d.Backoff
	if backoff == nil {
		backoff = RetryBackoff
	}
	disabled, err := d.Store.RecordDelivery(context.WithoutCancel(ctx), dl, res.Err, res.Status, res.Latency, backoff(dl.Attempt))
	if errors.Is(err, store.ErrLeaseLost) {
		log.Warn("webhook outcome not recorded: the lease was lost or the subscription deleted", "outcome", res.Err.String())
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case disabled:
		log.Warn("webhook subscription disabled after consecutive failures", "failures", domain.WebhookFailureLimit, "error", res.Err.String())
	case !res.Err.OK():
		log.Info("webhook delivery failed", "error", res.Err.String(), "latency_ms", res.Latency.Milliseconds())
	default:
		log.Debug("webhook delivered", "status", res.Status, "latency_ms", res.Latency.Milliseconds())
	}
	return nil
}

// secretFailure handles a subscription whose secret would not open. When
// MARKET_SECRET_KEY is known to be right (another secret opens), the row
// is at fault: the subscription is disabled, alone. Otherwise the key may
// be wrong on this worker: nothing is disabled, and the claim is left to
// run out so another worker (or this one, fixed) takes it.
func (d *Dispatcher) secretFailure(ctx context.Context, dl store.Delivery, log *slog.Logger) error {
	if !d.keyProven.Load() {
		others, err := d.Store.SealedSecrets(ctx, dl.WebhookID, 5)
		if err != nil {
			return err
		}
		for id, sealed := range others {
			if _, err := d.Box.Open(sealed, []byte(id)); err == nil {
				d.keyProven.Store(true)
				break
			}
		}
	}
	if !d.keyProven.Load() {
		log.Error("webhook secret does not open with MARKET_SECRET_KEY, and no other secret does either: check this worker's key; nothing was sent or disabled",
			"err", dl.SecretErr)
		return nil
	}
	if err := d.Store.DisableForSecret(context.WithoutCancel(ctx), dl); err != nil {
		return ignoreLost(err)
	}
	log.Error("webhook subscription disabled: its stored secret does not open with MARKET_SECRET_KEY (other secrets do); "+
		"its pending deliveries were dropped; the client can rotate the secret and re-enable it", "client_id", dl.ClientID, "err", dl.SecretErr)
	return nil
}

func ignoreLost(err error) error {
	if errors.Is(err, store.ErrLeaseLost) {
		return nil
	}
	return err
}
