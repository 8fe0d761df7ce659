// Package httpserve holds the limits every HTTP listener of the manager serves with: the
// gateway and the capability endpoint are reached by workers, and a worker must not be
// able to hold their file descriptors or memory with idle, slow or oversized requests.
package httpserve

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one listener accepts. Zero fields take the Default values.
type Limits struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. A handler that needs
	// longer (a git push) sets its own deadline through http.ResponseController.
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for its next
	// request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
	// MaxConnsPerAddr bounds the open connections of one client address; more are closed
	// as soon as they are accepted.
	MaxConnsPerAddr int
}

// Default limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 5 * time.Minute
	DefaultIdleTimeout       = 90 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnsPerAddr   = 64
)

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConnsPerAddr <= 0 {
		l.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	return l
}

// Server returns an http.Server for h with l's timeouts and header limit.
func Server(h http.Handler, l Limits) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Listen listens on addr (TCP) and caps the open connections per client address.
func Listen(addr string, l Limits) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return PerAddr(ln, l.withDefaults().MaxConnsPerAddr), nil
}

// PerAddr wraps ln so that each client IP address holds at most max open connections: a
// connection beyond that is closed at once, before any byte is read from it.
func PerAddr(ln net.Listener, max int) net.Listener {
	return &perAddr{Listener: ln, max: max, open: map[string]int{}}
}

type perAddr struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (p *perAddr) Accept() (net.Conn, error) {
	for {
		c, err := p.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		p.mu.Lock()
		if p.open[host] >= p.max {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.open[host]++
		p.mu.Unlock()
		return &countedConn{Conn: c, release: func() { p.release(host) }}, nil
	}
}

func (p *perAddr) release(host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[host]--; p.open[host] <= 0 {
		delete(p.open, host)
	}
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// countedConn gives its slot back once, on its first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
