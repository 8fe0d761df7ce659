package crd_test

import (
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// maxHeartbeatTTLSeconds is the schema bound of spec.heartbeatTTLSeconds: 30 days.
const maxHeartbeatTTLSeconds = 30 * 24 * 3600

var _ = Describe("WorkerRegistration heartbeat TTL bound", func() {
	It("accepts a TTL of exactly 30 days", func() {
		wr := newRegistration()
		wr.Spec.HeartbeatTTLSeconds = maxHeartbeatTTLSeconds
		Expect(k8sClient.Create(ctx, wr)).To(Succeed())
		stored := &fleetv1alpha1.WorkerRegistration{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(wr), stored)).To(Succeed())
		Expect(stored.Spec.HeartbeatTTLSeconds).To(Equal(int64(maxHeartbeatTTLSeconds)))
	})

	It("refuses a TTL above 30 days, including ones that would overflow a time.Duration", func() {
		for _, ttl := range []int64{
			maxHeartbeatTTLSeconds + 1,
			300 * 365 * 24 * 3600, // ~300 years: beyond time.Duration
			math.MaxInt64,
		} {
			wr := newRegistration()
			wr.Spec.HeartbeatTTLSeconds = ttl
			expectInvalid(k8sClient.Create(ctx, wr), "spec.heartbeatTTLSeconds", "less than or equal to 2592000")
		}
	})
})
