// Command post is the HTTP client of the e2e worker image (hack/e2e.sh puts it at /post):
// it sends one JSON body by POST with the token held in a file as a bearer token, the
// way a worker's Gitea client writes through the gateway, and prints the answer's status
// code on its first line and the body after it. It exits 0 when an answer came, whatever
// its status, 1 when none did, and 2 on wrong usage.
//
//	post TOKEN-FILE URL JSON-BODY
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: post TOKEN-FILE URL JSON-BODY")
		os.Exit(2)
	}
	if err := post(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "post:", err)
		os.Exit(1)
	}
}

func post(tokenFile, url, body string) error {
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Printf("%d\n%s\n", resp.StatusCode, out)
	return nil
}
