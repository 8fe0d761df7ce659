package gitearepository_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/cli"
)

// kubectlFleet runs `kubectl fleet args...` in namespace ns as the administrator.
func kubectlFleet(ns string, args ...string) (int, string, string) {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(env.WriteKubeconfig(path)).To(Succeed())
	var out, errOut bytes.Buffer
	o := cli.NewOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o.Getenv = func(string) string { return "" }
	code := cli.Execute(ctx, o, append([]string{"--kubeconfig", path, "-n", ns}, args...))
	return code, out.String(), errOut.String()
}

var _ = Describe("kubectl fleet in GiteaRepositories", func() {
	It("claims an item named as owner/name#N in a repository of the worker's namespace, and refuses one outside the worker's binding", func() {
		ns, err := env.NewNamespace(ctx, "team-cli")
		Expect(err).NotTo(HaveOccurred())
		a := readyServer()
		app, docs := serve(ns, a.Name), serve(ns, a.Name)
		w := newClaimer(ns, docs.full)

		code, stdout, stderr := kubectlFleet(ns, "claim", "issue", docs.full+"#1", "--worker", w.name, "-o", "json")
		Expect(code).To(Equal(cli.ExitOK), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		got := &fleetv1alpha1.TaskClaim{}
		Expect(json.Unmarshal([]byte(stdout), got)).To(Succeed())
		Expect(got.Status.Phase).To(Equal(fleetv1alpha1.ClaimPhaseActive))
		Expect(got.Spec.Target.Repository).To(Equal(docs.full))
		Expect(got.Status.Repository).To(HaveField("ID", docs.id))
		Expect(recordOf(docs.full)).To(HaveField("ClaimID", string(got.UID)))

		code, _, stderr = kubectlFleet(ns, "claim", "issue", app.full+"#1", "--worker", w.name)
		Expect(code).To(Equal(cli.ExitPolicy), stderr)
		Expect(stderr).To(ContainSubstring("worker_repository_mismatch"))
		Expect(recordOf(app.full)).To(BeNil(), "nothing was published in the other repository")
	})
})
