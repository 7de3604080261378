package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/store"
)

// taskLabels are the payload fields the metrics label tasks with (every
// payload of this package names its market; ingest payloads their
// combination and timeframe, scoring ones their style).
type taskLabels struct {
	Market     string `json:"market"`
	Exchange   string `json:"exchange"`
	Instrument string `json:"instrument"`
	Timeframe  string `json:"timeframe"`
	Style      string `json:"style"`
}

// instrument is the mux middleware recording each task's duration and
// outcome (package obs). It runs after skipSuperseded: a superseded task
// is not a run.
func instrument(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		var l taskLabels
		switch t.Type() {
		case TypeIngestTickers, TypeIngestCandles, TypeIngestFundamentals, TypeScore, TypeStats:
			if json.Unmarshal(t.Payload(), &l) != nil {
				return next.ProcessTask(ctx, t)
			}
		default:
			return next.ProcessTask(ctx, t)
		}
		start := time.Now()
		err := next.ProcessTask(ctx, t)
		took := time.Since(start)
		switch t.Type() {
		case TypeIngestTickers, TypeIngestCandles, TypeIngestFundamentals:
			cat := ""
			if err != nil {
				cat = IngestErrorCategory(err)
			}
			obs.IngestRun(ingestFeed(t.Type(), l), took, cat)
		case TypeScore:
			obs.ScoreRun(l.Market, l.Style, took, err)
		case TypeStats:
			obs.StatsRun(l.Market, took, err)
		}
		return err
	})
}

// ingestFeed names the ingest series of a task, as its feed-health row
// does (candles are one row per market and exchange).
func ingestFeed(typ string, l taskLabels) obs.Feed {
	f := obs.Feed{Market: l.Market, Exchange: l.Exchange, Instrument: l.Instrument}
	switch typ {
	case TypeIngestTickers:
		f.Kind = store.FeedKindTickers
	case TypeIngestCandles:
		feed := store.CandleFeed(domain.Market(l.Market), l.Exchange, domain.Timeframe(l.Timeframe))
		f.Kind, f.Instrument = feed.Kind, feed.Combination.Instrument
	default:
		f.Kind = store.FeedKindFundamentals
	}
	return f
}

// observeRows counts the rows an ingest task stored.
func observeRows(c domain.Combination, kind string, n int) {
	instrument := c.Instrument
	if store.IsCandleKind(kind) {
		instrument = domain.CandleInstrument
	}
	obs.IngestRows(obs.Feed{Market: string(c.Market), Exchange: c.Exchange, Instrument: instrument, Kind: kind}, n)
}

// IngestErrorCategory sorts an ingest failure for the metrics: store (our
// side: Postgres), timeout, rate_limited, upstream_status (the feed
// answered an error status), network, invalid_data, no_data, other.
func IngestErrorCategory(err error) string {
	var o ourSide
	var se *feeds.StatusError
	var ne net.Error
	var de *domain.Error
	msg := err.Error()
	switch {
	case errors.As(err, &o):
		return "store"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(msg, "rate limited") || strings.Contains(msg, "asks to wait"):
		return "rate_limited"
	case errors.As(err, &se) && se.StatusCode == 429:
		return "rate_limited"
	case errors.As(err, &se) && se.StatusCode == 0:
		return "network"
	case errors.As(err, &se):
		return "upstream_status"
	case errors.As(err, &ne):
		return "network"
	case errors.As(err, &de) && de.Code == domain.EINVALID:
		return "invalid_data"
	case strings.Contains(msg, "no tickers"):
		return "no_data"
	}
	return "other"
}

// Queues are every queue of the service.
var Queues = []string{QueueCritical, QueueLive, QueueDefault, QueueIngest, QueueMinute}

// allQueuesKey is asynq's registry of queue names (what asynqmon and the
// queue metrics list). asynq adds a queue to it on the first enqueue of a
// process only, so after a FLUSHDB the registry stays empty until restarts.
const allQueuesKey = rediskeys.AsynqQueues

// QueueRegistryInterval is how often KeepQueuesRegistered re-registers.
const QueueRegistryInterval = 5 * time.Second

// KeepQueuesRegistered adds the service's queues to asynq's registry now
// and every interval until ctx ends, so that after a Redis flush (or a new
// Redis) asynqmon and the queue metrics show the queues again without a
// restart. Redis errors are ignored: the next round retries.
func KeepQueuesRegistered(ctx context.Context, redisURL string, interval time.Duration) error {
	opt, err := rediskeys.PlainOptions(redisURL)
	if err != nil {
		return err
	}
	opt.MaxRetries = -1
	rdb := opt.NewClient()
	defer rdb.Close()
	members := make([]any, len(Queues))
	for i, q := range Queues {
		members[i] = q
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = rdb.SAdd(rctx, allQueuesKey, members...).Err()
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// QueueCollector is asynq's own Prometheus collector of the queues
// (asynq_queue_size, asynq_queue_latency_seconds, asynq_tasks_processed_total,
// ...), read from Redis at every scrape, and a function closing its
// connections. When Redis does not answer a ping within half a second the
// scrape has no asynq series (marketd_dependency_up says why) instead of
// waiting on Redis for every queue and logging each failure.
func QueueCollector(redisURL string) (prometheus.Collector, func(), error) {
	opt, err := rediskeys.AsynqOpt(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: redis url: %w", err)
	}
	switch o := opt.(type) {
	case asynq.RedisClientOpt:
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		opt = o
	case asynq.RedisFailoverClientOpt:
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		opt = o
	}
	popt, err := rediskeys.PlainOptions(redisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("worker: redis url: %w", err)
	}
	popt.DialTimeout, popt.ReadTimeout, popt.WriteTimeout, popt.MaxRetries = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond, -1
	popt.PoolSize = 2
	rdb := popt.NewClient()
	ins := asynq.NewInspector(opt)
	c := &queueCollector{inner: asynqmetrics.NewQueueMetricsCollector(ins), rdb: rdb}
	return c, func() { _ = ins.Close(); _ = rdb.Close() }, nil
}

type queueCollector struct {
	inner prometheus.Collector
	rdb   *redis.Client
}

// Describe sends nothing: the collector is unchecked, so registering it
// does not read Redis (asynq's own Describe collects once).
func (c *queueCollector) Describe(chan<- *prometheus.Desc) {}

// Collect reads the queues when Redis answers.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if c.rdb.Ping(ctx).Err() != nil {
		return
	}
	c.inner.Collect(ch)
}
