package httpserve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPerAddrCap opens more connections from one address than the cap allows and checks
// the extra ones are closed unread, and that a closed connection frees its slot.
func TestPerAddrCap(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Limits{MaxConnsPerAddr: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }), Limits{})
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// Each held connection is served.
	for _, c := range held {
		if got := get(t, c); got != "ok" {
			t.Fatalf("held connection answered %q", got)
		}
	}
	extra, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, extra); got != "" {
		t.Fatalf("a connection over the cap was served: %q", got)
	}
	_ = held[0].Close()
	// The slot comes back once the server side has seen the close.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if get(t, c) == "ok" {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a freed slot was never given back")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get sends one keep-alive request on c and returns the body, "" when the server closed c.
func get(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return ""
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServerLimits checks an idle connection is closed after IdleTimeout and headers
// beyond MaxHeaderBytes are refused.
func TestServerLimits(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Limits{IdleTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond, MaxHeaderBytes: 1 << 10})
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Close() }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// Silent after connecting: the header timeout closes it.
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a silent connection was not closed by the server: %v", err)
	}

	c, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 8<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers answered %d", resp.StatusCode)
	}
}
