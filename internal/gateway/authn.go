package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// Audience is the audience a worker's ServiceAccount token must be bound to
// (TokenRequest) for the gateway and the capability check to accept it.
const Audience = fleetv1alpha1.GatewayAudience

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// Caller is an authenticated worker: the ServiceAccount a TokenReview vouched for.
type Caller struct {
	// Namespace and Name are the ServiceAccount's, and so the WorkerRegistration's.
	Namespace, Name string
}

// ErrUnauthenticated is returned for a token that does not authenticate a ServiceAccount
// for Audience: missing, malformed, expired, revoked or bound to another audience.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator verifies ServiceAccount tokens with TokenReview and caches the answers
// briefly: a positive one at most CacheTTL and never past the token's own expiry, a
// refusal RejectTTL (a token the API server refused is not reviewed again meanwhile), at
// most CacheSize tokens in all.
type Authenticator struct {
	// Client creates TokenReviews.
	Client client.Client
	// Clock is the time source (defaults to the real clock).
	Clock clock.PassiveClock
	// CacheTTL bounds how long a positive answer is reused (default 30s).
	CacheTTL time.Duration
	// RejectTTL is how long a refused token stays refused without a new review (default
	// 30s). A token is refused for good once expired or revoked, so this only delays the
	// acceptance of a token that was refused while, say, its ServiceAccount was missing.
	RejectTTL time.Duration

	// MaxLifetime is the longest validity (exp - iat) a token may have (default
	// MaxTokenLifetime): a leaked worker token is useless an hour after it was minted.
	MaxLifetime time.Duration

	cache *cache.LRUExpireCache
}

// MaxTokenLifetime is the default Authenticator.MaxLifetime.
const MaxTokenLifetime = time.Hour

func (a *Authenticator) maxLifetime() time.Duration {
	if a.MaxLifetime > 0 {
		return a.MaxLifetime
	}
	return MaxTokenLifetime
}

// CacheSize is the most tokens an Authenticator remembers.
const CacheSize = 4096

// NewAuthenticator returns an Authenticator that creates TokenReviews with c.
func NewAuthenticator(c client.Client) *Authenticator {
	return &Authenticator{Client: c, Clock: clock.RealClock{}, CacheTTL: 30 * time.Second, RejectTTL: 30 * time.Second,
		cache: cache.NewLRUExpireCache(CacheSize)}
}

// BearerToken extracts the token of a request: "Authorization: Bearer t", Gitea's
// "Authorization: token t", or the password of basic auth (git). "" when there is none.
func BearerToken(r *http.Request) string {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, rest, _ := strings.Cut(h, " ")
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return strings.TrimSpace(rest)
	case "basic":
		if _, pw, ok := r.BasicAuth(); ok {
			return pw
		}
	}
	return ""
}

// Authenticate returns the ServiceAccount token authenticates for Audience. A token the
// API server does not accept is ErrUnauthenticated; a failing TokenReview is another error.
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Caller, error) {
	if token == "" || strings.Count(token, ".") != 2 {
		return Caller{}, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	if c, known, err := a.Lookup(token); known {
		return c, err
	}
	key := cacheKey(token)
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return Caller{}, fmt.Errorf("token review: %w", err)
	}
	st := tr.Status
	if !st.Authenticated || !slices.Contains(st.Audiences, Audience) {
		a.reject(key)
		return Caller{}, fmt.Errorf("%w: token not accepted for %s", ErrUnauthenticated, Audience)
	}
	c, ok := serviceAccount(st.User.Username)
	if !ok {
		a.reject(key)
		return Caller{}, fmt.Errorf("%w: %q is not a ServiceAccount", ErrUnauthenticated, st.User.Username)
	}
	if life, ok := lifetime(token); !ok || life > a.maxLifetime() {
		a.reject(key)
		return Caller{}, fmt.Errorf("%w: the token is valid for longer than %s; request one of at most that (kubectl fleet token --duration)",
			ErrUnauthenticated, a.maxLifetime())
	}
	if ttl := a.ttl(token); ttl > 0 {
		a.cache.Add(key, c, ttl)
	}
	return c, nil
}

// Lookup answers from the cache alone: known is false when token needs a TokenReview.
func (a *Authenticator) Lookup(token string) (c Caller, known bool, err error) {
	if token == "" || strings.Count(token, ".") != 2 {
		return Caller{}, true, fmt.Errorf("%w: no bearer token", ErrUnauthenticated)
	}
	v, ok := a.cache.Get(cacheKey(token))
	if !ok {
		return Caller{}, false, nil
	}
	if c, ok := v.(Caller); ok {
		return c, true, nil
	}
	return Caller{}, true, fmt.Errorf("%w: token refused recently", ErrUnauthenticated)
}

func cacheKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return string(sum[:])
}

// rejected marks a refused token in the cache.
type rejected struct{}

func (a *Authenticator) reject(key string) {
	if a.RejectTTL > 0 {
		a.cache.Add(key, rejected{}, a.RejectTTL)
	}
}

// tokenClaims reads a JWT's payload without verifying it (the TokenReview did).
func tokenClaims(token string) (exp, iat int64, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return 0, 0, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0, 0, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
		Iat int64 `json:"iat"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return 0, 0, false
	}
	return claims.Exp, claims.Iat, true
}

// lifetime is how long token was minted to be valid for (exp - iat); ok is false when
// either is missing.
func lifetime(token string) (time.Duration, bool) {
	exp, iat, ok := tokenClaims(token)
	if !ok || exp == 0 || iat == 0 || exp < iat {
		return 0, false
	}
	return time.Duration(exp-iat) * time.Second, true
}

// ttl is how long an answer for token may be reused: CacheTTL, cut at the token's expiry
// (read without verification: the TokenReview just verified it). Tokens without a
// readable expiry are not cached.
func (a *Authenticator) ttl(token string) time.Duration {
	exp, _, ok := tokenClaims(token)
	if !ok || exp == 0 {
		return 0
	}
	left := time.Unix(exp, 0).Sub(a.Clock.Now())
	return min(left, a.CacheTTL)
}

// serviceAccount parses "system:serviceaccount:<namespace>:<name>".
func serviceAccount(user string) (Caller, bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return Caller{}, false
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return Caller{}, false
	}
	return Caller{Namespace: ns, Name: name}, true
}
