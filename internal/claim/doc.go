// Package claim holds every decision of the task-claim protocol: role
// derivation, identity independence, validation and its pin, the claim-time
// safety clauses, capability activation and authorization, and the lifecycle
// of an active capability.
//
// The package is pure. It performs no I/O, reads no clock and knows nothing
// about Kubernetes clients or the Gitea SDK. A reconciler gathers the state
// (the worker's registration, the target as read from Gitea, the per-target
// Lease), passes it in together with the current time, and writes back what
// this package decides.
//
// # Protocol
//
// A worker starts neutral: it may read, but it holds no role and no task
// capability. [Authorize] refuses every operation for a nil capability.
//
//  1. The worker names one target. [Validate] derives the temporary role from
//     the target's kind and state alone ([DeriveRole]), enforces identity
//     independence ([CheckIndependence]) and the rejection rules, and on
//     success returns a [Validation] whose Pin fingerprints every mutable
//     input ([ComputePin]).
//  2. The worker repeats the pin. [DecideClaim] applies the five safety
//     clauses: a pin is required and must be the one issued; every pinned
//     component is re-read and compared; the per-target lock must still be at
//     the pinned generation; the claimed target must be the validated one;
//     and every loss is a typed, final result.
//  3. The reconciler performs the Lease compare-and-swap and publishes the
//     claim record in Gitea. Only when the read-back proves both does
//     [Activate] return a [Capability] bound to worker, repository, target,
//     role, operations, pin, claim/lease and expiry. A failed write is
//     reported with [ContentionLoss].
//  4. While active, [CheckActive] decides from fresh state whether the
//     capability ends and why; the reconciler looks again after
//     [RecheckAfter] (at the expiry, and at least every
//     [DefaultActiveRecheck], since Gitea sends no watch events). [EndPhase]
//     and [EndingFor] say how an ending is recorded: the final phase, the
//     record's final state and the audited event.
//
// [NextStep] says which of these steps a reconcile takes. The package also
// owns the vocabulary the API re-exports: the claim phases ([FinalPhase]),
// record states, triggers and events, and which claims protect their worker
// from retirement ([WorkflowOwners]).
//
// # Rule set
//
// Every refusal comes from one entry of rules.json, embedded in the binary
// and published unchanged to the Gitea repository at [RuleSetPath]. The
// class, blocker and message of a refusal are taken from that file, messages
// are fixed strings, and a [Result] has room for exactly one target: the one
// that was requested. Each result records [RuleSetDigest] so an auditor can
// tell which published rule set produced it.
package claim
