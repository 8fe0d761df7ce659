package fleet_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/retirement"
	"github.com/giteatools/fleet-controller/test/support/testenv"
	"github.com/giteatools/fleet-controller/test/support/testworker"
)

// Host ids: two hosts with a manager each, and one host no agent runs on. All of their
// workers are processes of this machine; a manager proves liveness for the rows
// registered under its own --host-id.
const (
	hostA = "fleet-e2e-host-a"
	hostB = "fleet-e2e-host-b"
	hostC = "fleet-e2e-host-c"
)

// waitAgents waits until the host Leases of hosts are held (read with kubectl).
func waitAgents(hosts ...string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		out, err := kubectlErr("-n", agentNamespace, "get", "leases", "-l", "fleet.giteatools.dev/agent-lease=host",
			"-o", `jsonpath={range .items[*]}{.metadata.annotations.fleet\.giteatools\.dev/host-id}={.spec.holderIdentity}{"\n"}{end}`)
		g.Expect(err).NotTo(HaveOccurred())
		held := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			if h, holder, ok := strings.Cut(strings.TrimSpace(l), "="); ok && holder != "" {
				held[h] = true
			}
		}
		for _, h := range hosts {
			g.Expect(held).To(HaveKey(h))
		}
	}).Should(Succeed())
}

// ownershipWatch counts the ownershipState changes of one registration.
func ownershipWatch(ns, name string) *atomic.Int64 {
	GinkgoHelper()
	w, err := k8sClient.Watch(ctx, &fleetv1alpha1.WorkerRegistrationList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	n := &atomic.Int64{}
	go func() {
		last := "unseen"
		for ev := range w.ResultChan() {
			wr, ok := ev.Object.(*fleetv1alpha1.WorkerRegistration)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			if last != "unseen" && wr.Status.OwnershipState != last {
				n.Add(1)
			}
			last = wr.Status.OwnershipState
		}
	}()
	return n
}

// ownershipOf reads the ownership state of every row of ns with kubectl.
func ownershipOf(ns string) map[string]string {
	GinkgoHelper()
	out := kubectl("-n", ns, "get", "workerregistrations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.phase}/{.status.ownershipState}{"\n"}{end}`)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m
}

// retiredAts reads the retiredAt of every registration of ns, by name ("" while Active).
// A row retired twice would show the second time.
func retiredAts(ns string) map[string]string {
	GinkgoHelper()
	out := kubectl("-n", ns, "get", "workerregistrations", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.retiredAt}{"\n"}{end}`)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m
}

// preservedReasons reads a plan's listed preserved rows and their reason codes.
func preservedReasons(ns, plan, field string) map[string]string {
	GinkgoHelper()
	out := jsonpath(ns, plan, `range .status.`+field+`[*]}{.workerIdentity}={.reasonCode}{"\n"}{end`)
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			m[k] = v
		}
	}
	return m
}

var _ = Describe("Retirement across several hosts, driven from outside", Ordered, func() {
	It("retires exactly the dead rows of both agents' hosts with one plan and one GitOps approval, and keeps the agent-less host's rows", func() {
		start := time.Now()
		a, b := startManager(hostA), startManager(hostB)
		_, _ = a, b
		waitAgents(hostA, hostB)
		ns := newNamespace("fleet-e2e")

		By("live workers on all three hosts, dead ones (killed processes) on all three, a pid-gone row that keeps heartbeating")
		var live, dead []*worker
		var mu sync.Mutex
		var wg sync.WaitGroup
		spawn := func(name, host string, into *[]*worker) {
			defer GinkgoRecover()
			defer wg.Done()
			w := startWorker(ns, name, host)
			mu.Lock()
			*into = append(*into, w)
			mu.Unlock()
		}
		for _, h := range []string{hostA, hostB, hostC} {
			short := h[len(h)-1:]
			for i := range 3 {
				wg.Add(1)
				go spawn(fmt.Sprintf("live-%s%d", short, i), h, &live)
			}
			for i := range 2 {
				wg.Add(1)
				go spawn(fmt.Sprintf("dead-%s%d", short, i), h, &dead)
			}
		}
		wg.Wait()
		fresh := startWorker(ns, "fresh-a", hostA)
		freshChanges := ownershipWatch(ns, "fresh-a")
		Eventually(func() string { return ownershipOf(ns)["fresh-a"] }).Should(Equal("Active/live"))
		// From here on, the one due change is live -> stale, once its process is gone.
		freshBefore := freshChanges.Load()
		for _, w := range dead {
			w.kill()
		}
		fresh.kill()
		heartbeatOnly(ns, "fresh-a")
		wantRetired := []string{"dead-a0", "dead-a1", "dead-b0", "dead-b1"}
		Eventually(func(g Gomega) {
			st := ownershipOf(ns)
			for _, n := range wantRetired {
				g.Expect(st[n]).To(Equal("Active/stale"), n)
			}
			g.Expect(st["live-a0"]).To(Equal("Active/live"))
			g.Expect(st["live-b0"]).To(Equal("Active/live"))
		}, 30*time.Second).Should(Succeed())

		By("kubectl apply of a fleet plan; kubectl get shows its snapshot")
		kubectlApply(ns, planManifest("retire-dead", ""))
		Eventually(func() string { return outcomeOf(ns, "retire-dead") }).Should(Equal("planned"))
		table := kubectl("-n", ns, "get", "retirementplans")
		GinkgoWriter.Printf("kubectl get retirementplans:\n%s\n", table)
		lines := strings.Split(table, "\n")
		header := strings.Fields(lines[0])
		Expect(header).To(ContainElements("OUTCOME", "CANDIDATES", "PRESERVED", "STALE", "LIVE", "SAFE"))
		fleetLine := ""
		for _, l := range lines[1:] {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "retire-dead" {
				fleetLine = l
			}
		}
		Expect(fleetLine).NotTo(BeEmpty(), "the fleet plan is listed")
		// Columns are read by their position under the header (the fleet plan's HOST and
		// RETIRED are empty).
		col := func(name string) string {
			start := strings.Index(lines[0], name)
			end := len(fleetLine)
			if i := slices.Index(header, name); i+1 < len(header) {
				end = min(end, strings.Index(lines[0], header[i+1]))
			}
			return strings.TrimSpace(fleetLine[start:end])
		}
		Expect(col("OUTCOME")).To(Equal("planned"))
		Expect(col("CANDIDATES")).To(Equal("4"))
		Expect(strconv.Atoi(col("LIVE"))).To(BeNumerically(">=", 9))
		Expect(strconv.Atoi(col("STALE"))).To(BeNumerically(">=", 4))
		ids := strings.Fields(jsonpath(ns, "retire-dead", `range .status.candidateWorkerIdentities[*]}{@}{" "}{end`))
		Expect(ids).To(Equal(wantRetired))
		preserved := preservedReasons(ns, "retire-dead", "preserved")
		for _, n := range []string{"live-c0", "live-c1", "live-c2", "dead-c0", "dead-c1"} {
			Expect(preserved).To(HaveKeyWithValue(n, "host_binding_unproven"))
		}
		Expect(preserved).To(HaveKeyWithValue("fresh-a", "heartbeat_not_expired"))
		Expect(jsonpath(ns, "retire-dead", ".status.hostsWithoutAgent[*].hostID")).To(Equal(hostC))
		registryAtPlan := jsonpath(ns, "retire-dead", ".status.registryFingerprint")

		By("kubectl lists every row's verdict in the fleet's pages, each page storing once what its rows share")
		// The pages follow the planned status: kubectl wait says when they hold every row.
		kubectl("-n", ns, "wait", "retirementplan/retire-dead", "--for=condition=PagesReady", "--timeout=60s")
		selector := jsonpath(ns, "retire-dead", ".status.pages.selector")
		Expect(selector).NotTo(BeEmpty())
		var pages fleetv1alpha1.RetirementPlanPageList
		Expect(json.Unmarshal([]byte(kubectl("-n", ns, "get", "retirementplanpages", "-l", selector, "-o", "json")), &pages)).To(Succeed())
		verdicts := map[string]string{}
		for i := range pages.Items {
			pg := &pages.Items[i]
			if pg.List == fleetv1alpha1.PageListCandidates && len(pg.Rows) > 1 {
				Expect(pg.Shared).NotTo(BeNil(), "page %s", pg.Name)
				Expect(pg.Shared.ReasonCode).To(Equal("eligible_stale_orphan"), "the candidates' shared reason is stored once on %s", pg.Name)
			}
			for _, v := range apiconv.PageVerdicts(pg) {
				Expect(verdicts).NotTo(HaveKey(v.WorkerIdentity), "a row is on one page")
				verdicts[v.WorkerIdentity] = pg.List + "/" + v.ReasonCode
				Expect(v.Evidence).NotTo(BeEmpty(), "%s has its evidence", v.WorkerIdentity)
			}
		}
		for _, n := range wantRetired {
			Expect(verdicts).To(HaveKeyWithValue(n, "Candidates/eligible_stale_orphan"))
		}
		for _, n := range []string{"live-c0", "dead-c1"} {
			Expect(verdicts).To(HaveKeyWithValue(n, "Preserved/host_binding_unproven"))
		}
		Expect(verdicts).To(HaveKeyWithValue("fresh-a", "Preserved/heartbeat_not_expired"))
		Expect(verdicts).To(HaveLen(len(ownershipOf(ns))), "every registration is on a page")

		By("the approval lands some seconds later, the GitOps way, while the live workers keep heartbeating")
		time.Sleep(6 * time.Second)
		kubectlApply(ns, planManifest("retire-dead", candidateApproval(ns, "retire-dead")))
		Eventually(func() string { return outcomeOf(ns, "retire-dead") }).Should(Equal("applied"))
		Expect(jsonpath(ns, "retire-dead", ".status.success")).To(Equal("true"))
		Expect(strings.Fields(jsonpath(ns, "retire-dead", `range .status.retired[*]}{@}{" "}{end`))).To(Equal(wantRetired))
		Expect(retiredBy(ns, "retire-dead")).To(ConsistOf(wantRetired))
		st := ownershipOf(ns)
		for n, s := range st {
			if slices.Contains(wantRetired, n) {
				Expect(s).To(Equal("Retired/historical"), n)
				continue
			}
			Expect(s).To(HavePrefix("Active/"), "%s was not to be retired", n)
		}
		for _, w := range live {
			Expect(st[w.name]).To(Equal("Active/live"), "%s is live", w.name)
		}
		// The heartbeats moved the registry since the plan; the candidate-bound approval
		// still applied.
		Expect(registryAtPlan).NotTo(BeEmpty())
		By("managedFields name the controller as the writer of the plan's status, not its binary")
		Expect(strings.Fields(jsonpath(ns, "retire-dead", `range .metadata.managedFields[?(@.subresource=="status")]}{.manager}{" "}{end`))).
			To(HaveEach(Equal("fleet-controller")))

		By("a pid-gone, heartbeat-fresh row changed ownership state at most once while both managers ran")
		Expect(freshChanges.Load() - freshBefore).To(BeNumerically("<=", 1))
		Expect(st["fresh-a"]).To(Equal("Active/stale"))
		GinkgoWriter.Printf("multi-host spec: %s; ownershipState changes of the pid-gone, heartbeat-fresh row since its process died: %d\n",
			time.Since(start).Round(time.Second), freshChanges.Load()-freshBefore)
	})

	It("retires, on both agents' hosts, only the dead rows of the GiteaRepository a plan is bound to, while workers of two repositories heartbeat", func() {
		start := time.Now()
		startManager(hostA)
		startManager(hostB)
		waitAgents(hostA, hostB)
		ns := newNamespace("fleet-e2e-bound")

		By("two GiteaRepositories of the namespace, on one server, each with the Gitea repository ID it resolved to")
		for name, ownerName := range map[string]string{"app": "acme/app", "lib": "acme/lib"} {
			owner, repo, _ := strings.Cut(ownerName, "/")
			kubectlApply(ns, fmt.Sprintf(`apiVersion: fleet.giteatools.dev/v1alpha1
kind: GiteaRepository
metadata:
  name: %s
spec:
  server: forge
  owner: %s
  name: %s
`, name, owner, repo))
		}
		// No Gitea runs here, so nothing resolves them: the IDs are recorded as the
		// GiteaRepository reconciler would, once.
		kubectl("-n", ns, "patch", "gitearepository", "app", "--subresource=status", "--type=merge", "-p", `{"status":{"repositoryID":11}}`)
		kubectl("-n", ns, "patch", "gitearepository", "lib", "--subresource=status", "--type=merge", "-p", `{"status":{"repositoryID":12}}`)

		By("live and dead workers of both repositories on both hosts")
		var dead []*worker
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, h := range []string{hostA, hostB} {
			short := h[len(h)-1:]
			for _, repo := range []string{"app", "lib"} {
				for _, state := range []string{"live", "dead"} {
					wg.Add(1)
					go func() {
						defer GinkgoRecover()
						defer wg.Done()
						w := startWorkerOf(ns, fmt.Sprintf("%s-%s-%s", state, repo, short), h, "acme/"+repo)
						if state == "dead" {
							mu.Lock()
							dead = append(dead, w)
							mu.Unlock()
						}
					}()
				}
			}
		}
		wg.Wait()
		for _, w := range dead {
			w.kill()
		}
		wantRetired := []string{"dead-app-a", "dead-app-b"}
		Eventually(func(g Gomega) {
			st := ownershipOf(ns)
			for _, n := range []string{"dead-app-a", "dead-app-b", "dead-lib-a", "dead-lib-b"} {
				g.Expect(st[n]).To(Equal("Active/stale"), n)
			}
		}, 30*time.Second).Should(Succeed())
		Expect(kubectl("-n", ns, "get", "workerregistration", "dead-lib-a", "-o",
			`jsonpath={.status.conditions[?(@.type=="RepositoryBound")].status}`)).To(Equal("True"), "a worker's binding names a repository of its namespace")

		By("a plan bound to acme/app: the other repository's dead rows are kept, on both hosts")
		kubectlApply(ns, planManifestOf("retire-app", "acme/app", ""))
		Eventually(func() string { return outcomeOf(ns, "retire-app") }).Should(Equal("planned"))
		Expect(strings.Fields(jsonpath(ns, "retire-app", `range .status.candidateWorkerIdentities[*]}{@}{" "}{end`))).To(Equal(wantRetired))
		preserved := preservedReasons(ns, "retire-app", "preserved")
		for _, n := range []string{"dead-lib-a", "dead-lib-b"} {
			Expect(preserved).To(HaveKeyWithValue(n, retirement.ReasonRepositoryAmbiguous))
		}

		By("the approval lands seconds later, while every live worker keeps heartbeating")
		time.Sleep(3 * time.Second)
		kubectlApply(ns, planManifestOf("retire-app", "acme/app", candidateApproval(ns, "retire-app")))
		Eventually(func() string { return outcomeOf(ns, "retire-app") }).Should(Equal("applied"))
		Expect(jsonpath(ns, "retire-app", ".status.success")).To(Equal("true"))
		Expect(retiredBy(ns, "retire-app")).To(ConsistOf(wantRetired))
		st := ownershipOf(ns)
		Expect(st).To(HaveKeyWithValue("dead-lib-a", "Active/stale"))
		Expect(st).To(HaveKeyWithValue("dead-lib-b", "Active/stale"))
		for _, n := range []string{"live-app-a", "live-app-b", "live-lib-a", "live-lib-b"} {
			Expect(st).To(HaveKeyWithValue(n, "Active/live"))
		}
		GinkgoWriter.Printf("bound-plan spec: %s\n", time.Since(start).Round(time.Second))
	})

	It("resumes the apply when the host's manager is killed between two row writes and a new one starts: "+
		"every approved row retired or kept with a reason, nothing twice, a row changed after the kill kept", func() {
		const hostR = "fleet-e2e-host-r"
		// 200 rows at 10 a second give the kill a 20-second window between two row writes
		// on any machine. test/e2e kills a manager pod in the middle of 1,000 rows.
		const rows = 200
		start := time.Now()
		m := startManager(hostR, "--apply-row-writes-per-second=10")
		// Host B's manager is the fleet coordinator once host R's is killed. Its stand-in for
		// a lost host waits twice its takeover timeout; a long one here lets the returning
		// agent resume however slowly this spec's own kubectl calls run on a loaded machine.
		startManager(hostB, "--apply-takeover-timeout=2m")
		waitAgents(hostR, hostB)
		ns := newNamespace("fleet-e2e-restart")
		live := startWorker(ns, "live-r", hostR)

		By(fmt.Sprintf("%d dead rows on host R", rows))
		createDeadRows(ns, hostR, "dead-", rows)

		kubectlApply(ns, planManifest("retire-many", ""))
		Eventually(func() string { return outcomeOf(ns, "retire-many") }).Should(Equal("planned"))
		Expect(jsonpath(ns, "retire-many", ".status.candidateCount")).To(Equal(strconv.Itoa(rows)))
		hostPlan := jsonpath(ns, "retire-many", ".status.hosts[0].plan")
		Expect(jsonpath(ns, "retire-many", ".status.hosts[0].hostID")).To(Equal(hostR))

		By("approving, and killing host R's manager with SIGKILL while its apply is under way")
		kubectlApply(ns, planManifest("retire-many", candidateApproval(ns, "retire-many")))
		var atKill int
		Eventually(func() int { atKill = len(retiredBy(ns, "retire-many")); return atKill }, 60*time.Second, 200*time.Millisecond).
			Should(BeNumerically(">", 0))
		m.Kill()
		time.Sleep(time.Second) // a write the killed process had sent lands or fails by now
		// The killed manager's hold lapses one takeover timeout after its last renewal. The
		// new manager judges it by its own --apply-takeover-timeout, long enough here for
		// the edits below to land while the hold is still fresh, however loaded the machine.
		const takeoverTimeout = 30 * time.Second
		renewed, err := time.Parse(time.RFC3339Nano, jsonpath(ns, hostPlan, ".status.applyProgress.renewedAt"))
		Expect(err).NotTo(HaveOccurred())
		heldUntil := renewed.Add(takeoverTimeout)
		By("a new manager with the same --host-id starts at once, as a restarted process or a rescheduled pod would")
		startManager(hostR, fmt.Sprintf("--apply-takeover-timeout=%s", takeoverTimeout))
		before := retiredBy(ns, "retire-many")
		beforeRetiredAt := retiredAts(ns)
		GinkgoWriter.Printf("killed host R's manager with %d of %d rows retired\n", len(before), rows)
		Expect(len(before)).To(BeNumerically("<", rows-1), "the apply finished before the kill: nothing was interrupted")
		Expect(jsonpath(ns, hostPlan, ".status.applyProgress.state")).To(Equal(retirement.ApplyInProgress))
		Expect(jsonpath(ns, hostPlan, `range .status.applyProgress.intendedRows[*]}{.name}={.resourceVersion}{"\n"}{end`)).
			To(ContainSubstring(fmt.Sprintf("dead-%04d=", rows-1)), "the intent records each row's resourceVersion")

		By("while the killed manager's hold is fresh, someone moves the heartbeat of a row the apply had not reached further back, and labels another")
		touched, labelled := fmt.Sprintf("dead-%04d", rows-1), fmt.Sprintf("dead-%04d", rows-2)
		Expect(slices.Contains(before, touched) || slices.Contains(before, labelled)).To(BeFalse())
		kubectl("-n", ns, "patch", "workerregistration", touched, "--subresource=status", "--type=merge",
			"-p", fmt.Sprintf(`{"status":{"lastHeartbeatAt":%q}}`, time.Now().Add(-3*time.Hour).UTC().Format(time.RFC3339)))
		kubectl("-n", ns, "label", "workerregistration", labelled, "touched=after-the-kill")
		Expect(time.Now()).To(BeTemporally("<", heldUntil), "the edits landed before the killed manager's hold lapsed")
		Expect(ownershipOf(ns)[touched]).To(Equal("Active/stale"), "an older heartbeat leaves it a stale orphan, a candidate of any new plan")
		Expect(retiredBy(ns, "retire-many")).To(HaveLen(len(before)), "nothing is written while the killed manager's hold is fresh")

		By("the new manager takes the apply over once the hold lapsed, and resumes it")
		// On a machine that runs the whole suite at once the resumed apply writes its rows
		// far slower than alone; the rows retired so far are in the message of a time-out.
		Eventually(func() string {
			return fmt.Sprintf("%s (%d rows retired)", outcomeOf(ns, "retire-many"), len(retiredBy(ns, "retire-many")))
		}, 10*time.Minute, 2*time.Second).Should(HavePrefix("applied "))
		retired := retiredBy(ns, "retire-many")
		Expect(retired).To(HaveLen(rows-1), "every approved row but the changed one is retired")
		Expect(retired).NotTo(ContainElement(touched))
		Expect(retired).To(ContainElement(labelled), "a label changes nothing the approval covers")
		slices.Sort(retired)
		Expect(strings.Fields(jsonpath(ns, "retire-many", `range .status.retired[*]}{@}{" "}{end`))).To(Equal(retired),
			"the report names every retired row, before and after the takeover")
		Expect(jsonpath(ns, "retire-many", ".status.retiredCount")).To(Equal(strconv.Itoa(rows - 1)))
		after := retiredAts(ns)
		for _, n := range before {
			Expect(after[n]).To(Equal(beforeRetiredAt[n]), "%s, retired before the kill, is not retired again", n)
		}
		By("no row was written while the killed manager's hold was fresh")
		for _, n := range retired {
			if slices.Contains(before, n) {
				continue
			}
			at, err := time.Parse(time.RFC3339, after[n])
			Expect(err).NotTo(HaveOccurred())
			// retiredAt has whole seconds.
			Expect(at).NotTo(BeTemporally("<", heldUntil.Truncate(time.Second)), "%s was retired at %s, before the hold lapsed at %s", n, at, heldUntil)
		}
		Expect(preservedReasons(ns, "retire-many", "applyPreserved")).To(Equal(map[string]string{touched: retirement.ReasonRowChangedSincePlan}),
			"the row changed after the kill is kept, and only it")
		Expect(ownershipOf(ns)[touched]).To(Equal("Active/stale"))
		Expect(jsonpath(ns, "retire-many", ".status.success")).To(Equal("true"), "every approved row was retired or kept with its reason")
		Expect(jsonpath(ns, "retire-many", ".status.applyComplete")).To(Equal("true"))
		Expect(jsonpath(ns, "retire-many", `range .status.conditions[?(@.type=="Ready")]}{.status}/{.reason}{end`)).To(Equal("True/ApplyResumed"))
		Expect(jsonpath(ns, hostPlan, ".status.applyProgress.state")).To(Equal(retirement.ApplyFinished))
		Expect(jsonpath(ns, hostPlan, ".status.applyProgress.takeover")).To(Equal(retirement.TakeoverResumed))
		from := jsonpath(ns, hostPlan, ".status.applyProgress.takenOverFrom")
		taker := jsonpath(ns, hostPlan, ".status.applyProgress.applier")
		Expect(from).NotTo(BeEmpty())
		Expect(taker).NotTo(Equal(from))
		Expect(jsonpath(ns, "retire-many", ".status.message")).To(ContainSubstring(taker+" resumed the apply held by "+from),
			"the report says the apply was resumed, and by whom")
		st := ownershipOf(ns)
		Expect(st[live.name]).To(Equal("Active/live"))
		GinkgoWriter.Printf("restart spec: %s; %d retired before the kill, %d after the takeover, 1 kept as %s\n",
			time.Since(start).Round(time.Second), len(before), rows-1-len(before), retirement.ReasonRowChangedSincePlan)
	})

	It("closes a lost host's plan without writing its rows when its only manager is killed between the plan and the approval", func() {
		const hostL = "fleet-e2e-host-l"
		start := time.Now()
		lost := startManager(hostL)
		startManager(hostB) // the fleet coordinator, or its standby until host L's manager is gone
		waitAgents(hostL, hostB)
		ns := newNamespace("fleet-e2e-lost")
		createDeadRows(ns, hostL, "dead-l-", 3)
		createDeadRows(ns, hostB, "dead-b-", 2)

		kubectlApply(ns, planManifest("retire-lost", ""))
		Eventually(func() string { return outcomeOf(ns, "retire-lost") }, 60*time.Second).Should(Equal("planned"))
		Expect(jsonpath(ns, "retire-lost", ".status.candidateCount")).To(Equal("5"))
		hostPlanL := jsonpath(ns, "retire-lost", `.status.hosts[?(@.hostID=="`+hostL+`")].plan`)
		Expect(hostPlanL).NotTo(BeEmpty())

		By("killing host L's only manager, then approving once its Lease and the grace have run out")
		lost.Kill()
		time.Sleep(10 * time.Second) // the Lease (4 s) and the grace (the Lease duration) have lapsed
		kubectlApply(ns, planManifest("retire-lost", candidateApproval(ns, "retire-lost")))
		Eventually(func() string { return jsonpath(ns, "retire-lost", ".status.applyComplete") }, 90*time.Second).Should(Equal("false"))

		By("the stand-in closed host L's plan in one write, with no row of host L written")
		Expect(outcomeOf(ns, hostPlanL)).To(Equal(retirement.OutcomeTransactionFailed))
		Expect(jsonpath(ns, hostPlanL, `.status.conditions[?(@.type=="HostAgentLost")].status`)).To(Equal("True"))
		Expect(jsonpath(ns, hostPlanL, ".status.applyProgress")).To(BeEmpty(), "no apply started on host L")
		Expect(jsonpath(ns, "retire-lost", ".status.success")).To(Equal("false"))
		Expect(jsonpath(ns, "retire-lost", `.status.conditions[?(@.type=="Ready")].reason`)).To(Equal(fleetv1alpha1.ReasonApplyPartial))
		Expect(jsonpath(ns, "retire-lost", `.status.conditions[?(@.type=="Stalled")].status`)).To(Equal("True"))
		Expect(jsonpath(ns, "retire-lost", `.status.hostsWithoutAgent[*].hostID`)).To(Equal(hostL))
		Expect(retiredBy(ns, "retire-lost")).To(ConsistOf("dead-b-0000", "dead-b-0001"), "host B's agent applied its share")
		kept := preservedReasons(ns, "retire-lost", "applyPreserved")
		Expect(kept).To(Equal(map[string]string{
			"dead-l-0000": retirement.ReasonHostBindingUnproven, "dead-l-0001": retirement.ReasonHostBindingUnproven,
			"dead-l-0002": retirement.ReasonHostBindingUnproven}))

		By("a manager for host L that comes back finds its plan final and writes nothing")
		startManager(hostL)
		waitAgents(hostL)
		Consistently(func() []string { return retiredBy(ns, "retire-lost") }, 5*time.Second, time.Second).
			Should(ConsistOf("dead-b-0000", "dead-b-0001"))
		st := ownershipOf(ns)
		for _, n := range []string{"dead-l-0000", "dead-l-0001", "dead-l-0002"} {
			Expect(st[n]).To(HavePrefix("Active/"), n)
		}
		GinkgoWriter.Printf("lost-host spec: %s\n", time.Since(start).Round(time.Second))
	})

	It("says a host's pages were not written when its manager is killed while writing them, removes the part written, and still applies the plan", func() {
		const hostP = "fleet-e2e-host-p"
		const rows = 200
		// One row per page: the pages take long enough to be cut short.
		m := startManager(hostP, "--plan-page-rows=1")
		waitAgents(hostP)
		ns := newNamespace("fleet-e2e-pages")
		live := startWorker(ns, "live-p", hostP)
		By(fmt.Sprintf("%d dead rows on host P", rows))
		createDeadRows(ns, hostP, "dead-", rows)

		kubectlApply(ns, planManifest("pages-cut", ""))
		var hostPlan string
		Eventually(func() string { hostPlan = jsonpath(ns, "pages-cut", ".status.hosts[0].plan"); return hostPlan }).ShouldNot(BeEmpty())
		pages := func() int {
			var l metav1.PartialObjectMetadataList
			l.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("RetirementPlanPageList"))
			Expect(k8sClient.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.PlanLabel: hostPlan})).To(Succeed())
			return len(l.Items)
		}
		By("killing host P's manager with SIGKILL once its host plan is planned and its first pages are written")
		Eventually(pages, 60*time.Second, 10*time.Millisecond).Should(BeNumerically(">", 0))
		m.Kill()
		atKill := pages()
		GinkgoWriter.Printf("killed host P's manager with %d of %d pages written\n", atKill, rows+1)
		Expect(atKill).To(BeNumerically("<", rows+1), "the pages were all written before the kill: nothing was interrupted")
		Expect(jsonpath(ns, hostPlan, ".status.outcome")).To(Equal("planned"))
		Expect(jsonpath(ns, hostPlan, `.status.conditions[?(@.type=="PagesReady")].reason`)).To(Equal(fleetv1alpha1.ReasonWritingPages))

		By("a new manager with the same --host-id reports the pages as not written and removes the part written")
		startManager(hostP)
		Eventually(func() string {
			return jsonpath(ns, hostPlan, `.status.conditions[?(@.type=="PagesReady")].reason`)
		}, 60*time.Second).Should(Equal(fleetv1alpha1.ReasonPagesNotWritten))
		Eventually(func() string {
			return jsonpath(ns, "pages-cut", `.status.conditions[?(@.type=="PagesReady")].reason`)
		}).Should(Equal(fleetv1alpha1.ReasonPagesNotWritten))
		Expect(jsonpath(ns, "pages-cut", `.status.conditions[?(@.type=="PagesReady")].message`)).To(ContainSubstring(hostP))
		Expect(jsonpath(ns, "pages-cut", ".status.pages")).To(BeEmpty(), "no selector names a partial set of pages")
		Expect(pages()).To(BeZero(), "the pages the killed manager wrote are removed")
		Expect(kubectl("-n", ns, "get", "events", "--field-selector", "reason="+fleetv1alpha1.ReasonPagesNotWritten,
			"-o", "jsonpath={.items[*].involvedObject.name}")).To(ContainSubstring(hostPlan))

		By("the plan itself stays whole: one GitOps approval retires every dead row")
		Expect(jsonpath(ns, "pages-cut", ".status.candidateCount")).To(Equal(strconv.Itoa(rows)))
		kubectlApply(ns, planManifest("pages-cut", candidateApproval(ns, "pages-cut")))
		Eventually(func() string { return outcomeOf(ns, "pages-cut") }, 120*time.Second).Should(Equal("applied"))
		Expect(retiredBy(ns, "pages-cut")).To(HaveLen(rows))
		Expect(jsonpath(ns, "pages-cut", ".status.success")).To(Equal("true"))
		Expect(ownershipOf(ns)[live.name]).To(Equal("Active/live"))
	})
})

// createDeadRows registers n rows named <prefix>NNNN on host whose processes are gone,
// with an hour's heartbeat, and waits until the host's agent has them all as stale.
func createDeadRows(ns, host, prefix string, n int) {
	GinkgoHelper()
	facts, err := testenv.HostFacts(host)
	Expect(err).NotTo(HaveOccurred())
	f := testworker.Fleet{Client: k8sClient, Host: retirement.Host{HostID: host, BootID: facts.BootID, BootTime: facts.BootTime}, Repository: repository}
	gone := testworker.Exited()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := g; i < n; i += 8 {
				wr := f.Registration(ns, fmt.Sprintf("%s%04d", prefix, i), gone)
				Expect(k8sClient.Create(ctx, wr)).To(Succeed())
				f.Heartbeat(ctx, wr, time.Hour) // retried on conflict with the manager's first look
			}
		}()
	}
	wg.Wait()
	Eventually(func(g Gomega) {
		stale := 0
		for name, s := range ownershipOf(ns) {
			if strings.HasPrefix(name, prefix) && s == "Active/stale" {
				stale++
			}
		}
		g.Expect(stale).To(Equal(n))
	}, 120*time.Second, time.Second).Should(Succeed())
}
