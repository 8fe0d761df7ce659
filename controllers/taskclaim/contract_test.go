package taskclaim_test

import (
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/giteatools/fleet-controller/internal/apiconv"
	"github.com/giteatools/fleet-controller/internal/claim"
	"github.com/giteatools/fleet-controller/internal/giteaclaim"
)

var _ = Describe("The lock and claim-record primitives stay independently callable", func() {
	It("keeps a plain coordination Lease a compare-and-swap lock", func() {
		name := "plain-lock-" + suffix
		now := metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsMain},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To(int32(30)), AcquireTime: &now, RenewTime: &now}}
		Expect(k8s.Create(ctx, l)).To(Succeed())
		stale := l.DeepCopy()

		l.Spec.HolderIdentity = ptr.To("b")
		Expect(k8s.Update(ctx, l)).To(Succeed(), "an update at the current version wins")
		stale.Spec.HolderIdentity = ptr.To("c")
		Expect(apierrors.IsConflict(k8s.Update(ctx, stale))).To(BeTrue(), "an update at a stale version loses")
		again := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsMain}}
		Expect(apierrors.IsAlreadyExists(k8s.Create(ctx, again))).To(BeTrue(), "create is create-once")
		Expect(apierrors.IsConflict(k8s.Delete(ctx, l, client.Preconditions{ResourceVersion: ptr.To(stale.ResourceVersion)}))).To(BeTrue())
		Consistently(func() string { return holderOf(getLease(nsMain, name)) }, time.Second).Should(Equal("b"),
			"the controller leaves locks that are not its claims' alone")
	})

	It("uses a standard Lease for each claim lock, which a stale writer cannot take", func() {
		w := newWorker(nsMain)
		t := issueTarget(newIssue("contract: claim lock"))
		tc := w.activate(t)

		u := &unstructured.Unstructured{}
		u.SetAPIVersion("coordination.k8s.io/v1")
		u.SetKind("Lease")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: nsMain, Name: tc.Status.Capability.LeaseName}, u)).To(Succeed())
		holder, _, _ := unstructured.NestedString(u.Object, "spec", "holderIdentity")
		Expect(holder).To(Equal(string(tc.UID)))
		secs, _, _ := unstructured.NestedInt64(u.Object, "spec", "leaseDurationSeconds")
		Expect(secs).To(Equal(int64(claimTTL / time.Second)))
		Expect(u.GetResourceVersion()).To(Equal(tc.Status.Capability.LeaseGeneration))

		stale := lease(nsMain, t)
		stale.ResourceVersion = "1"
		stale.Spec.HolderIdentity = ptr.To("usurper")
		Expect(apierrors.IsConflict(k8s.Update(ctx, stale))).To(BeTrue())
		Expect(holderOf(lease(nsMain, t))).To(Equal(string(tc.UID)))
	})

	It("keeps the Gitea claim record usable directly, and consistent with the controller's records", func() {
		t := apiconv.Target(issueTarget(newIssue("contract: direct record")))
		now := time.Now().UTC()
		rec := func(id string) claim.Record {
			return claim.Record{ClaimID: id, Worker: "reg-" + id, Identity: human.login, Role: "author",
				Repository: repo, Kind: claim.KindIssue, Number: t.Number, Generation: "7", Pin: "sha256:" + id,
				State: claim.RecordStateActive, ClaimedAt: now, ExpiresAt: now.Add(time.Hour)}
		}
		first, err := gc.Publish(ctx, t, rec("direct-a"))
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Record.ClaimID).To(Equal("direct-a"))
		same, err := gc.Publish(ctx, t, rec("direct-a"))
		Expect(err).NotTo(HaveOccurred())
		Expect(same.ContentVersion).To(Equal(first.ContentVersion), "publishing the same record again writes nothing")
		_, err = gc.Publish(ctx, t, rec("direct-b"))
		Expect(errors.Is(err, giteaclaim.ErrForeignClaim)).To(BeTrue(), "a second claim: %v", err)
		_, err = gc.Clear(ctx, t, "direct-b", claim.RecordStateReleased)
		Expect(errors.Is(err, giteaclaim.ErrNotInForce)).To(BeTrue(), "clearing another claim: %v", err)
		cleared, err := gc.Clear(ctx, t, "direct-a", claim.RecordStateReleased)
		Expect(err).NotTo(HaveOccurred())
		Expect(cleared.Record.State).To(Equal(claim.RecordStateReleased))
		_, err = gc.Publish(ctx, t, rec("direct-b"))
		Expect(err).NotTo(HaveOccurred(), "the target is free once the first claim ended")

		By("a controller-held record refuses direct writers the same way")
		w := newWorker(nsMain)
		held := issueTarget(newIssue("contract: controller record"))
		tc := w.activate(held)
		_, err = gc.Publish(ctx, apiconv.Target(held), claim.Record{ClaimID: "direct-c", Worker: "x", Identity: human.login,
			Role: "author", Repository: repo, Kind: claim.KindIssue, Number: held.Number, Generation: "1",
			Pin: "sha256:x", ClaimedAt: now, ExpiresAt: now.Add(time.Hour)})
		var fe *giteaclaim.ForeignClaimError
		Expect(errors.As(err, &fe)).To(BeTrue(), "publishing over the controller's claim: %v", err)
		Expect(fe.Holder.ClaimID).To(Equal(string(tc.UID)))
		body, err := srv.Body(ctx, repo, held.Number)
		Expect(err).NotTo(HaveOccurred())
		parsed, err := giteaclaim.ParseBody(body, apiconv.Target(held))
		Expect(err).NotTo(HaveOccurred())
		Expect(parsed.ClaimID).To(Equal(string(tc.UID)))
		Expect(parsed.Generation).To(Equal(tc.Status.Capability.LeaseGeneration))
	})
})

func getLease(ns, name string) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}
