package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"
)

var _ = Describe("The gateway over TLS", func() {
	It("serves HTTPS from its certificate folder, answers plain HTTP with an error, and serves a rotated certificate", func() {
		dir := GinkgoT().TempDir()
		first := writeServingCert(dir)
		tgw := newGateway(k8s, apiReader, recorder, clock.RealClock{})
		tgw.Addr, tgw.CertDir = freeAddr(), dir
		gctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(tgw.Start(gctx)).To(Succeed())
		}()
		Eventually(func() error { return dialOK(tgw.Addr) }).Should(Succeed())

		w := newWorker(nsMain)
		n := newIssue("read over TLS")
		trusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(dir)}}}
		get := func(hc *http.Client, base string) (int, string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+apiPath("/issues/%d", n), nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+w.saToken)
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), nil
		}

		By("an authenticated read over HTTPS, trusting the serving certificate")
		status, body, err := get(trusting, "https://"+tgw.Addr)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring("read over TLS"))

		By("plain HTTP on the TLS port: the token is never accepted in the clear")
		status, body, err = get(&http.Client{Timeout: 10 * time.Second}, "http://"+tgw.Addr)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusBadRequest), body)
		Expect(body).NotTo(ContainSubstring("read over TLS"))

		By("a client that does not trust the certificate")
		_, _, err = get(&http.Client{Timeout: 10 * time.Second}, "https://"+tgw.Addr)
		Expect(err).To(MatchError(ContainSubstring("certificate")))

		By("rotating the files: the new certificate is served without a restart")
		second := writeServingCert(dir)
		Expect(second).NotTo(Equal(first))
		Eventually(func() ([]byte, error) { return servedLeaf(tgw.Addr) }, 30*time.Second).Should(Equal(second))
	})
})

// writeServingCert writes a fresh self-signed certificate for 127.0.0.1 as tls.crt and
// tls.key in dir and returns the leaf's DER bytes.
func writeServingCert(dir string) []byte {
	GinkgoHelper()
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	Expect(err).NotTo(HaveOccurred())
	// Key first: the watcher reloads on the certificate's change.
	Expect(os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600)).To(Succeed())
	block, _ := pem.Decode(crt)
	Expect(block).NotTo(BeNil())
	return block.Bytes
}

// poolOf trusts the certificates of dir's tls.crt (the leaf and its issuer).
func poolOf(dir string) *x509.CertPool {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(b)).To(BeTrue())
	return pool
}

// servedLeaf is the DER of the certificate the listener at addr presents.
func servedLeaf(addr string) ([]byte, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the presented certificate
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].Raw, nil
}

func dialOK(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	return err
}
