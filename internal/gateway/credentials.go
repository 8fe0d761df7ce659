package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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

// ServerLabel names the GiteaServer a credentials Secret's token is for; a Secret
// without it holds a token of the flags' server (--gitea-url).
const ServerLabel = fleetv1alpha1.GiteaServerLabel

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

// Token returns the gateway token of the Gitea login on the flags' server.
func (c *Credentials) Token(ctx context.Context, login string) (string, error) {
	return c.TokenOn(ctx, "", c.Gitea, login)
}

// TokenOn returns the gateway token of the Gitea login on the GiteaServer server ("" for
// the flags' server), checked with gc, the controller's client there: only a Secret
// labelled for that server is read, so a token never reaches another server.
func (c *Credentials) TokenOn(ctx context.Context, server string, gc *giteaclaim.Client, login string) (string, error) {
	key := server + "\x00" + strings.ToLower(login)
	if v, ok := c.cache.Get(key); ok {
		return v.(string), nil
	}
	sel, err := credentialSelector(server, login)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCredentials, err)
	}
	list := &corev1.SecretList{}
	if err := c.Reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return "", fmt.Errorf("listing credentials of %s: %w", login, err)
	}
	if len(list.Items) != 1 {
		return "", fmt.Errorf("%w: %d Secrets match %s in %s", ErrNoCredentials, len(list.Items), sel, c.Namespace)
	}
	token := strings.TrimSpace(string(list.Items[0].Data[TokenKey]))
	if token == "" {
		return "", fmt.Errorf("%w: Secret %s has no %q", ErrNoCredentials, list.Items[0].Name, TokenKey)
	}
	me, _, err := gc.WithToken(token).SDK(ctx).GetMyUserInfo()
	if err != nil {
		return "", fmt.Errorf("%w: checking the token of %s: %w", ErrNoCredentials, login, err)
	}
	if !strings.EqualFold(me.UserName, login) {
		return "", fmt.Errorf("%w: the token in Secret %s belongs to another Gitea user", ErrNoCredentials, list.Items[0].Name)
	}
	c.cache.Add(key, token, c.TTL)
	return token, nil
}

// credentialSelector selects the Secrets of login's token on server: labelled with both,
// or, for the flags' server (""), with the login and no server.
func credentialSelector(server, login string) (labels.Selector, error) {
	sel := labels.NewSelector()
	byLogin, err := labels.NewRequirement(LoginLabel, selection.Equals, []string{login})
	if err != nil {
		return nil, fmt.Errorf("the login %q cannot be selected: %w", login, err)
	}
	var byServer *labels.Requirement
	if server == "" {
		byServer, err = labels.NewRequirement(ServerLabel, selection.DoesNotExist, nil)
	} else {
		byServer, err = labels.NewRequirement(ServerLabel, selection.Equals, []string{server})
	}
	if err != nil {
		return nil, fmt.Errorf("the server %q cannot be selected: %w", server, err)
	}
	return sel.Add(*byLogin, *byServer), nil
}
