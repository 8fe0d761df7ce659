package testfleet

import (
	"sync/atomic"

	"github.com/onsi/ginkgo/v2"

	"github.com/giteatools/fleet-controller/test/support/testgitea"
)

// SpecHooks registers the top-level nodes every claim suite runs around its specs, and
// returns the record of their failures for StopGitea. Call it once, at the suite's top
// level; gitea names the suite's Gitea and repository, and is read as each spec begins
// (the suite sets them in its BeforeSuite):
//
//	var failures = testfleet.SpecHooks(func() (*testgitea.Server, string) { return srv, repo })
//
// After each spec outside an ordered container, and after that spec's own cleanups, the
// pull requests left open in the repository are closed (ClosePulls says why); an ordered
// container's are closed after the next spec outside one.
func SpecHooks(gitea func() (srv *testgitea.Server, repo string)) *Failures {
	f := &Failures{}
	ginkgo.BeforeEach(func() {
		if !ginkgo.CurrentSpecReport().IsInOrderedContainer {
			srv, repo := gitea()
			ginkgo.DeferCleanup(ClosePulls, srv, repo)
		}
	}, ginkgo.Offset(1))
	ginkgo.AfterEach(func() {
		if ginkgo.CurrentSpecReport().Failed() {
			f.failed.Store(true)
		}
	}, ginkgo.Offset(1))
	return f
}

// Failures records whether a spec of the suite failed.
type Failures struct{ failed atomic.Bool }

// Any says whether a spec failed, or the node running now (a BeforeSuite's cleanup, for
// one) has: then StopGitea keeps Gitea's run directory for a look.
func (f *Failures) Any() bool { return f.failed.Load() || ginkgo.CurrentSpecReport().Failed() }
