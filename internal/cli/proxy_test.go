package cli_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// beforeFirst is a reverse proxy in front of the suite's API server that runs hook once,
// just before forwarding the first request match selects. It stands for whatever else
// writes an object between a command's read and its write: the controller, another user.
// The commands reach it over plain HTTP; it reaches the API server as the administrator,
// so impersonation (--as) passes through.
type beforeFirst struct {
	once  sync.Once
	fired chan struct{}
}

// proxyKubeconfig starts the proxy for this spec and returns a kubeconfig that uses it.
func proxyKubeconfig(match func(*http.Request) bool, hook func()) (string, *beforeFirst) {
	GinkgoHelper()
	target, err := url.Parse(env.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	transport, err := rest.TransportFor(env.Config)
	Expect(err).NotTo(HaveOccurred())
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	b := &beforeFirst{fired: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if match(req) {
			b.once.Do(func() {
				defer GinkgoRecover()
				hook()
				close(b.fired)
			})
		}
		rp.ServeHTTP(w, req)
	}))
	DeferCleanup(srv.Close)

	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy", Namespace: "default"}
	kc.CurrentContext = "proxy"
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig-proxy")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path, b
}

// patchOf matches a PATCH of the named RetirementPlan (not its status).
func patchOf(ns, name string) func(*http.Request) bool {
	path := "/apis/fleet.giteatools.dev/v1alpha1/namespaces/" + ns + "/retirementplans/" + name
	return func(req *http.Request) bool { return req.Method == http.MethodPatch && req.URL.Path == path }
}
