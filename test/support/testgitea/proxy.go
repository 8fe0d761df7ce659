package testgitea

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy is a reverse proxy in front of the real Gitea server on its own local port. A
// client pointed at its URL reaches Gitea as usual, while a test can count the requests
// that went through (Requests) and stop the proxy (Stop: connections are refused, exactly
// as from a Gitea that is down) and start it again on the same port (Start).
type Proxy struct {
	// URL is the proxy's base URL; use it instead of Server.URL.
	URL string

	addr     string
	handler  http.Handler
	requests atomic.Int64

	mu  sync.Mutex
	srv *http.Server
}

// NewProxy starts a proxy in front of s.
func (s *Server) NewProxy() (*Proxy, error) {
	target, err := url.Parse(s.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing the Gitea URL: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = s.HTTP.Transport
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: "127.0.0.1:" + port, URL: "http://127.0.0.1:" + port}
	p.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		rp.ServeHTTP(w, r)
	})
	return p, p.Start()
}

// Start listens again on the proxy's address. Starting a running proxy does nothing.
func (p *Proxy) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 { // the port was just released; the kernel may need a moment
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("proxy listening on %s: %w", p.addr, err)
	}
	p.srv = &http.Server{Handler: p.handler, ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Printf("testgitea proxy: %v\n", err)
		}
	}(p.srv)
	return nil
}

// Stop closes the listener and every open connection: from now on requests fail as they
// do against a stopped server. Stopping a stopped proxy does nothing.
func (p *Proxy) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		return nil
	}
	err := p.srv.Close()
	p.srv = nil
	return err
}

// Requests is the number of requests the proxy received since it was made or Reset.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Reset sets the request count to zero.
func (p *Proxy) Reset() { p.requests.Store(0) }

// Close stops the proxy for good.
func (p *Proxy) Close(context.Context) error { return p.Stop() }
