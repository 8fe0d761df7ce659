package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Limiters hands out one token bucket per key (a worker, a client address), remembering
// at most CacheSize keys for ten minutes each. The zero value is not usable: NewLimiters.
type Limiters struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	cache *cache.LRUExpireCache
}

// NewLimiters returns buckets of r tokens a second, burst at most.
func NewLimiters(r rate.Limit, burst int) *Limiters {
	return &Limiters{rate: r, burst: burst, cache: cache.NewLRUExpireCache(CacheSize)}
}

// For returns key's bucket.
func (l *Limiters) For(key string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.cache.Get(key); ok {
		return v.(*rate.Limiter)
	}
	b := rate.NewLimiter(l.rate, l.burst)
	l.cache.Add(key, b, 10*time.Minute)
	return b
}

// Defaults of the failed-authentication limit: each client address may fail
// authentication DefaultAuthFailureBurst times, then once a second.
const (
	DefaultAuthFailureRate  = rate.Limit(1)
	DefaultAuthFailureBurst = 10
)

// AuthGuard limits the TokenReviews that fail, per client address: a client that keeps
// presenting new tokens the API server refuses is answered 429 without reaching it.
// Accepted tokens, and answers from the Authenticator's cache (a missing or malformed
// token, one refused recently), cost nothing and count for nothing.
type AuthGuard struct {
	failures *Limiters
}

// NewAuthGuard returns a guard allowing burst failures per address, then r a second.
func NewAuthGuard(r rate.Limit, burst int) *AuthGuard {
	return &AuthGuard{failures: NewLimiters(r, burst)}
}

// Blocked reports whether r's client has used up its failures.
func (g *AuthGuard) Blocked(r *http.Request) bool {
	return g.failures.For(clientAddress(r)).Tokens() < 1
}

// Authenticate authenticates r's token with a. A token a answers from its cache (accepted
// or refused recently) costs nothing and is never blocked, so workers whose tokens are
// known keep working while another client on their address is blocked; a token that needs
// a TokenReview is refused with ErrBlocked while r's client is blocked, and a refusal
// counts against it.
func (g *AuthGuard) Authenticate(ctx context.Context, a *Authenticator, r *http.Request) (Caller, error) {
	token := BearerToken(r)
	if c, known, err := a.Lookup(token); known {
		return c, err // no TokenReview was made: nothing to count
	}
	if g.Blocked(r) {
		return Caller{}, ErrBlocked
	}
	c, err := a.Authenticate(ctx, token)
	if errors.Is(err, ErrUnauthenticated) {
		g.Failed(r)
	}
	return c, err
}

// ErrBlocked is returned for a client that failed authentication too often (429).
var ErrBlocked = errors.New("too many failed authentications")

// Failed records a failed authentication by r's client.
func (g *AuthGuard) Failed(r *http.Request) {
	g.failures.For(clientAddress(r)).Allow()
}

// clientAddress is the host of the connection's remote address (forwarding headers are
// the client's to write, so they are not read).
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
