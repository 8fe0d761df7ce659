package testenv

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountToken asks the API server for a bound token of ServiceAccount ns/name
// (TokenRequest) with the given audience ("" = the API server's own), valid for an hour.
func (e *Env) ServiceAccountToken(ctx context.Context, ns, name, audience string) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if audience != "" {
		tr.Spec.Audiences = []string{audience}
	}
	if err := e.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// SignServiceAccountToken signs a ServiceAccount token the way the API server does, with
// its own signing key, but with the expiry the caller chooses: the only way to have an
// expired token in a test, since TokenRequest issues at least ten minutes. A token signed
// here with a future expiry authenticates like a TokenRequest one (tests use that as the
// control).
func (e *Env) SignServiceAccountToken(ctx context.Context, ns, name, audience string, issued, expires time.Time) (string, error) {
	sa := &corev1.ServiceAccount{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sa); err != nil {
		return "", fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, name, err)
	}
	api := e.Environment.ControlPlane.APIServer
	if api == nil || api.CertDir == "" {
		return "", errors.New("the API server's certificate folder is unknown")
	}
	keyPEM, err := os.ReadFile(filepath.Join(api.CertDir, "sa-signer.key"))
	if err != nil {
		return "", err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return "", err
	}
	alg := "RS256"
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = "ES256"
	}
	header, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": api.SecureServing.URL("https", "/").String(),
		"sub": "system:serviceaccount:" + ns + ":" + name,
		"aud": []string{audience},
		"iat": issued.Unix(), "nbf": issued.Unix(), "exp": expires.Unix(),
		"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]string{"name": name, "uid": string(sa.UID)}},
	})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey:
		var r, s *big.Int
		if r, s, err = ecdsa.Sign(rand.Reader, k, sum[:]); err == nil {
			sig = make([]byte, 64)
			r.FillBytes(sig[:32])
			s.FillBytes(sig[32:])
		}
	}
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

func parseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("sa-signer.key is not PEM")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing sa-signer.key: %w", err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	}
	return nil, errors.New("sa-signer.key is neither an RSA nor an ECDSA key")
}
