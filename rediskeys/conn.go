package rediskeys

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Sentinel names the Redis Sentinels a deployment asks for its primary
// (MARKET_REDIS_SENTINEL_ADDRS, MARKET_REDIS_SENTINEL_MASTER,
// MARKET_REDIS_SENTINEL_PASSWORD). The user, password, TLS and database of
// the data nodes stay MARKET_REDIS_URL's; its host is then not dialled.
type Sentinel struct {
	Addrs    []string // host:port of each sentinel
	Master   string   // the monitored primary's name
	Password string   // the sentinels' own requirepass, if any
}

// The query parameters that carry a Sentinel inside a deployment's Redis
// URL: every role and package is handed one string, and the ones that
// connect read the Sentinel back from it (Options, AsynqOpt).
const (
	sentinelAddrsParam    = "sentinel_addrs"
	sentinelMasterParam   = "sentinel_master"
	sentinelPasswordParam = "sentinel_password"
)

// WithSentinel returns a Redis URL that connects through s (unchanged
// when s has no addresses).
func WithSentinel(rawURL string, s Sentinel) (string, error) {
	if len(s.Addrs) == 0 {
		return rawURL, nil
	}
	if s.Master == "" {
		return "", fmt.Errorf("rediskeys: sentinels need the primary's name (MARKET_REDIS_SENTINEL_MASTER)")
	}
	for _, a := range s.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", fmt.Errorf("rediskeys: sentinel address %q: must be host:port: %v", a, err)
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("rediskeys: parse redis url: %w", err)
	}
	q := u.Query()
	q.Set(sentinelAddrsParam, strings.Join(s.Addrs, ","))
	q.Set(sentinelMasterParam, s.Master)
	if s.Password != "" {
		q.Set(sentinelPasswordParam, s.Password)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Options are the options of a connection to a deployment's Redis:
// go-redis's for the data nodes, and the Sentinel that names the primary
// when one is configured.
type Options struct {
	*redis.Options
	Sentinel Sentinel
}

// PlainOptions reads a Redis URL as go-redis parses it, with its Sentinel
// if it carries one, and no tuning: for the connections of tools and
// housekeeping that keep go-redis's own timeouts (ClientOptions tunes).
func PlainOptions(rawURL string) (*Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("rediskeys: parse redis url: %w", err)
	}
	q := u.Query()
	var s Sentinel
	if addrs := q.Get(sentinelAddrsParam); addrs != "" {
		s.Addrs = strings.Split(addrs, ",")
	}
	s.Master, s.Password = q.Get(sentinelMasterParam), q.Get(sentinelPasswordParam)
	q.Del(sentinelAddrsParam)
	q.Del(sentinelMasterParam)
	q.Del(sentinelPasswordParam)
	u.RawQuery = q.Encode()
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("rediskeys: parse redis url: %w", err)
	}
	if len(s.Addrs) > 0 && s.Master == "" {
		return nil, fmt.Errorf("rediskeys: parse redis url: sentinels without the primary's name")
	}
	return &Options{Options: opts, Sentinel: s}, nil
}

// NewClient connects with the options: to the URL's host, or to the
// primary the sentinels name, following it when they fail over (go-redis
// asks them again after a connection error, and drops the pool's
// connections to a former primary).
func (o *Options) NewClient() *redis.Client {
	if len(o.Sentinel.Addrs) == 0 {
		return redis.NewClient(o.Options)
	}
	r := o.Options
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:       o.Sentinel.Master,
		SentinelAddrs:    o.Sentinel.Addrs,
		SentinelPassword: o.Sentinel.Password,
		Protocol:         r.Protocol,
		Username:         r.Username,
		Password:         r.Password,
		DB:               r.DB,
		MaxRetries:       r.MaxRetries,
		MinRetryBackoff:  r.MinRetryBackoff,
		MaxRetryBackoff:  r.MaxRetryBackoff,
		DialTimeout:      r.DialTimeout,
		ReadTimeout:      r.ReadTimeout,
		WriteTimeout:     r.WriteTimeout,
		PoolFIFO:         r.PoolFIFO,
		PoolSize:         r.PoolSize,
		PoolTimeout:      r.PoolTimeout,
		MinIdleConns:     r.MinIdleConns,
		MaxIdleConns:     r.MaxIdleConns,
		MaxActiveConns:   r.MaxActiveConns,
		ConnMaxIdleTime:  r.ConnMaxIdleTime,
		ConnMaxLifetime:  r.ConnMaxLifetime,
		TLSConfig:        r.TLSConfig,
		DisableIdentity:  r.DisableIdentity,
	})
}

// AsynqOpt is the connection asynq (its client, server, scheduler,
// inspector and asynqmon) makes to a deployment's Redis: through the
// Sentinel when the URL carries one (asynq.RedisFailoverClientOpt), with
// the URL's user, password, TLS and database either way.
func AsynqOpt(rawURL string) (asynq.RedisConnOpt, error) {
	o, err := PlainOptions(rawURL)
	if err != nil {
		return nil, err
	}
	r := o.Options
	if len(o.Sentinel.Addrs) == 0 {
		return asynq.RedisClientOpt{Network: r.Network, Addr: r.Addr, Username: r.Username, Password: r.Password,
			DB: r.DB, TLSConfig: r.TLSConfig}, nil
	}
	return asynq.RedisFailoverClientOpt{MasterName: o.Sentinel.Master, SentinelAddrs: o.Sentinel.Addrs,
		SentinelPassword: o.Sentinel.Password, Username: r.Username, Password: r.Password, DB: r.DB, TLSConfig: r.TLSConfig}, nil
}

// SameTarget tells whether two Redis URLs lead to the same database: the
// same sentinel primary (by name) or the same address (loopback names
// folded into one), and the same database number. Two spellings of one
// target ("redis://localhost" and "redis://127.0.0.1:6379/0") are the same.
func SameTarget(a, b string) (bool, error) {
	oa, err := PlainOptions(a)
	if err != nil {
		return false, err
	}
	ob, err := PlainOptions(b)
	if err != nil {
		return false, err
	}
	if oa.DB != ob.DB {
		return false, nil
	}
	if oa.Sentinel.Master != "" || ob.Sentinel.Master != "" {
		return oa.Sentinel.Master == ob.Sentinel.Master, nil
	}
	return normalAddr(oa.Addr) == normalAddr(ob.Addr), nil
}

// normalAddr folds the loopback names of an address into one.
func normalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	host = strings.ToLower(host)
	if ip := net.ParseIP(host); host == "localhost" || host == "" || ip != nil && ip.IsLoopback() {
		host = "localhost"
	} else if ip != nil {
		host = ip.String()
	}
	return net.JoinHostPort(host, port)
}
