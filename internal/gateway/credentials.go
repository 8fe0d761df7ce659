package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/internal/giteaclaim"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// LoginLabel labels the Secret that holds an identity's gateway token; its value is the
// Gitea login. The Secret's "token" key holds a token of that login with the scopes
// write:repository, write:issue and read:user.
const LoginLabel = fleetv1alpha1.GiteaLoginLabel

// TokenKey is the key of the token in a credentials Secret.
const TokenKey = "token"

// +kubebuilder:rbac:groups="",namespace=fleet-system,resources=secrets,verbs=get;list

// ErrNoCredentials: no usable gateway token for the identity.
var ErrNoCredentials = errors.New("no gateway credentials for the identity")

// Credentials finds the per-identity Gitea tokens the gateway acts with, in Secrets of one
// namespace that only the manager reads. A token is used only after Gitea confirmed that
// it belongs to the identity; answers are cached for TTL (at most CacheSize identities).
type Credentials struct {
	// Reader reads Secrets (the API reader: no cluster-wide Secret informer).
	Reader client.Reader
	// Namespace holds the Secrets.
	Namespace string
	// Gitea is the controller's Gitea client; WithToken checks a token's owner.
	Gitea *giteaclaim.Client
	// Clock and TTL bound the cache.
	Clock clock.PassiveClock
	TTL   time.Duration

	cache *cache.LRUExpireCache
}

// NewCredentials returns Credentials reading Secrets of namespace.
func NewCredentials(r client.Reader, namespace string, gc *giteaclaim.Client) *Credentials {
	return &Credentials{Reader: r, Namespace: namespace, Gitea: gc, Clock: clock.RealClock{}, TTL: time.Minute,
		cache: cache.NewLRUExpireCache(CacheSize)}
}

// Token returns the gateway token of the Gitea login.
func (c *Credentials) Token(ctx context.Context, login string) (string, error) {
	key := strings.ToLower(login)
	if v, ok := c.cache.Get(key); ok {
		return v.(string), nil
	}
	list := &corev1.SecretList{}
	if err := c.Reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{LoginLabel: login}); err != nil {
		return "", fmt.Errorf("listing credentials of %s: %w", login, err)
	}
	if len(list.Items) != 1 {
		return "", fmt.Errorf("%w: %d Secrets labelled %s=%s in %s", ErrNoCredentials, len(list.Items), LoginLabel, login, c.Namespace)
	}
	token := strings.TrimSpace(string(list.Items[0].Data[TokenKey]))
	if token == "" {
		return "", fmt.Errorf("%w: Secret %s has no %q", ErrNoCredentials, list.Items[0].Name, TokenKey)
	}
	me, _, err := c.Gitea.WithToken(token).SDK(ctx).GetMyUserInfo()
	if err != nil {
		return "", fmt.Errorf("%w: checking the token of %s: %w", ErrNoCredentials, login, err)
	}
	if !strings.EqualFold(me.UserName, login) {
		return "", fmt.Errorf("%w: the token in Secret %s belongs to another Gitea user", ErrNoCredentials, list.Items[0].Name)
	}
	c.cache.Add(key, token, c.TTL)
	return token, nil
}
