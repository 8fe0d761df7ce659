// Package taskclaim holds the end-to-end suite of the TaskClaim protocol (seed 002): a
// real kube-apiserver (envtest) with the project's CRDs, RBAC and admission policies, a
// real Gitea server, and the TaskClaim and WorkerRegistration reconcilers running in a
// controller-runtime manager. The package has no code of its own; see the _test.go files.
//
// Run it with KUBEBUILDER_ASSETS pointing at kube-apiserver and etcd (hack/envtest.sh
// prints the folder). Gitea is the server named by GITEA_URL and GITEA_TOKEN, or one the
// suite starts with hack/gitea.sh; a Gitea that cannot start fails the suite.
package taskclaim
