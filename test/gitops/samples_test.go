package gitops_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/giteatools/fleet-controller/test/support/testenv"
)

// The published modules the GitOps tools' CRDs are taken from, at the versions the
// samples were written against.
var toolCRDs = []struct{ module, file string }{
	{"github.com/fluxcd/source-controller@v1.9.6", "config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"},
	{"github.com/fluxcd/kustomize-controller@v1.9.6", "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"},
	{"github.com/argoproj/argo-cd/v3@v3.4.0", "manifests/crds/application-crd.yaml"},
	{"github.com/argoproj/argo-cd/v3@v3.4.0", "manifests/crds/appproject-crd.yaml"},
}

// moduleDir downloads module@version through the Go module proxy and returns its folder.
func moduleDir(module string) string {
	GinkgoHelper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = GinkgoT().TempDir() // outside this module: go.mod and go.sum stay as they are
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	Expect(json.Unmarshal(out, &info)).To(Succeed(), "go mod download %s: %v: %s", module, err, out)
	Expect(info.Error).To(BeEmpty())
	Expect(err).NotTo(HaveOccurred())
	return info.Dir
}

func samples(parts ...string) string {
	GinkgoHelper()
	root, err := testenv.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(append([]string{root, "config", "samples", "gitops"}, parts...)...)
}

// objects reads every object of a YAML file of one or more documents.
func objects(path string) []*unstructured.Unstructured {
	GinkgoHelper()
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed(), path)
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func one(path, kind string) *unstructured.Unstructured {
	GinkgoHelper()
	var found []*unstructured.Unstructured
	for _, u := range objects(path) {
		if u.GetKind() == kind {
			found = append(found, u)
		}
	}
	Expect(found).To(HaveLen(1), "one %s in %s", kind, path)
	return found[0]
}

func str(u *unstructured.Unstructured, path ...string) string {
	GinkgoHelper()
	v, found, err := unstructured.NestedString(u.Object, path...)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue(), "%s has %s", u.GetName(), strings.Join(path, "."))
	return v
}

var _ = Describe("The GitOps samples", Ordered, func() {
	var kubectl func(args ...string) (string, string, error)
	run := func(args ...string) string {
		GinkgoHelper()
		out, errOut, err := kubectl(args...)
		Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), errOut)
		return out
	}

	BeforeAll(func() {
		var err error
		kubectl, err = env.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		for _, c := range toolCRDs {
			run("apply", "--server-side", "-f", filepath.Join(moduleDir(c.module), c.file))
		}
		run("wait", "--for=condition=Established", "--timeout=60s",
			"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io",
			"crd/applications.argoproj.io", "crd/appprojects.argoproj.io")
		for _, ns := range []string{"fleet", "argocd"} {
			run("create", "namespace", ns)
		}
	})

	It("apply the plans as one ServiceAccount, the one their approval names with its groups", func() {
		sa := one(samples("rbac", "serviceaccount.yaml"), "ServiceAccount")
		binding := one(samples("rbac", "serviceaccount.yaml"), "RoleBinding")
		Expect(str(binding, "roleRef", "name")).To(Equal("fleet-retirement-gitops"), "the shipped GitOps role")
		subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
		Expect(subjects).To(ConsistOf(map[string]any{"kind": "ServiceAccount", "name": sa.GetName(), "namespace": sa.GetNamespace()}))

		flux := one(samples("flux", "flux-kustomization.yaml"), "Kustomization")
		Expect(str(flux, "spec", "serviceAccountName")).To(Equal(sa.GetName()))
		Expect(flux.GetNamespace()).To(Equal(sa.GetNamespace()), "Flux impersonates a ServiceAccount of the Kustomization's namespace")
		Expect(str(flux, "spec", "targetNamespace")).To(Equal(sa.GetNamespace()))
		for _, f := range []string{"prune", "wait"} {
			v, _, _ := unstructured.NestedBool(flux.Object, "spec", f)
			Expect(v).To(BeTrue(), "spec.%s", f)
		}

		project := one(samples("argocd", "appproject.yaml"), "AppProject")
		dsa, _, _ := unstructured.NestedSlice(project.Object, "spec", "destinationServiceAccounts")
		Expect(dsa).To(ConsistOf(HaveKeyWithValue("defaultServiceAccount", sa.GetName())))
		Expect(dsa[0]).To(HaveKeyWithValue("namespace", sa.GetNamespace()))
		app := one(samples("argocd", "application.yaml"), "Application")
		Expect(str(app, "spec", "project")).To(Equal(project.GetName()))
		Expect(str(app, "spec", "destination", "namespace")).To(Equal(sa.GetNamespace()))

		user, groups := testenv.ServiceAccount(sa.GetNamespace(), sa.GetName())
		plan := one(samples("plans", "retire-stale.yaml"), "RetirementPlan")
		Expect(plan.GetNamespace()).To(Equal(sa.GetNamespace()))
		Expect(str(plan, "spec", "approval", "approvedBy")).To(Equal(user))
		got, _, _ := unstructured.NestedStringSlice(plan.Object, "spec", "approval", "approvedGroups")
		Expect(got).To(ConsistOf(groups))
	})

	It("ship the Argo CD health check in argocd-cm exactly as in its Lua file", func() {
		script, err := os.ReadFile(samples("argocd", "retirementplan-health.lua"))
		Expect(err).NotTo(HaveOccurred())
		cm := one(samples("argocd", "argocd-cm.yaml"), "ConfigMap")
		Expect(str(cm, "data", "resource.customizations.health.fleet.giteatools.dev_RetirementPlan")).To(Equal(string(script)))
		Expect(str(cm, "data", "application.sync.impersonation.enabled")).To(Equal("true"))
	})

	It("pass a server-side dry-run apply, and the ServiceAccount may create, approve and prune the sample plan", func() {
		run("apply", "--server-side", "-k", samples("rbac"))
		for _, dir := range []string{"flux", "argocd"} {
			out := run("apply", "--server-side", "--dry-run=server", "-k", samples(dir))
			Expect(out).To(ContainSubstring("(server dry run)"))
		}
		user, groups := testenv.ServiceAccount("fleet", "retirement-gitops")
		as := []string{"--as=" + user}
		for _, g := range groups {
			as = append(as, "--as-group="+g)
		}
		plan := samples("plans", "retire-stale.yaml")
		Expect(run(append(as, "apply", "--server-side", "--dry-run=server", "-f", plan)...)).To(ContainSubstring("retirementplan.fleet.giteatools.dev/retire-stale serverside-applied (server dry run)"))
		run(append(as, "apply", "--server-side", "-f", plan)...)
		run(append(as, "delete", "-f", plan)...)

		By("and another identity may not approve in its name")
		_, errOut, err := kubectl("apply", "--server-side", "--dry-run=server", "-f", plan)
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(ContainSubstring("spec.approval.approvedBy must be the approving user"))
	})
})
