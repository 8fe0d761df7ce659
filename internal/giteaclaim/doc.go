// Package giteaclaim keeps the authoritative record of a task claim inside
// Gitea and reads the Gitea state a claim decision depends on.
//
// It owns no domain types of its own: targets, claim records, record states,
// events, triggers and target state are those of the pure package
// internal/claim ([claim.Target], [claim.Record], [claim.RecordState],
// [claim.Event], [claim.Trigger], [claim.TargetState]). This package is the
// Gitea side of that model: it stores and reads those values in Gitea, and
// nothing of the Gitea SDK leaks past it. What is Gitea's alone stays here:
// the body block and audit comment formats, the guarded write, the client and
// its errors.
//
// # Claim record
//
// A claim lives in the body of the claimed issue or pull request (pull
// requests are issues in Gitea and share their number space) as one
// machine-readable line:
//
//	<!-- fleet-claim:v1 {"claimID":"…","worker":"…",…} -->
//
// Everything else in the body is left byte for byte as it was. The only
// compare-and-swap Gitea offers on an issue is its body: a PATCH that carries
// nothing but `body` and `content_version` is refused with 409 Conflict when
// the version is no longer current. [Client.Publish] therefore reads the
// issue, refuses when another claim is in force or the issue is assigned to
// somebody else, writes the block guarded by the version it read, and reads
// the issue back to prove that the record now in force is exactly the one it
// wrote. Every outcome other than that proof is an error; a lost race is
// [ErrConflict], which is a normal answer that calls for a fresh read, not a
// blind retry.
//
// A record is in force while its state is [claim.RecordStateActive] and its
// expiresAt lies in the future ([claim.Record.InForce]). [Client.Clear] ends a
// record by rewriting its state to a final one (released, completed, expired
// or revoked; see [claim.RecordState.Final]) with the same guarded write; the
// block stays in the body as the last word on that claim until the next claim
// replaces it. The JSON of the block is [claim.Record]'s, with times in UTC at
// second precision.
//
// # Audit trail
//
// Lifecycle transitions are issue comments: a sentence for people followed by
// a `<!-- fleet-claim-audit:v1 {…} -->` line for machines
// ([Client.RecordTransition], [Client.ListTransitions]). Comments have no
// compare-and-swap: callers post a transition only after the guarded body
// write has decided the outcome, and readers should trust only comments
// posted by the controller's own identity ([Transition.Author]). A
// transition's event is a [claim.Event]; a revocation names one of the
// revocation triggers ([claim.Trigger.Revocation]), no other event a trigger.
//
// # Target state
//
// [Client.ReadTarget] is the gatherer for the claim decisions: it collects
// what a claim validation needs about an issue or pull request (state,
// author, head, base-branch head as the parity revision, pushers — from Gitea's
// push records on the timeline, commit authors and committers, and
// Co-authored-by trailers mapped through the administrator e-mail search —,
// reviews, who merged it, the pull requests cross-referencing an issue, labels,
// assignees, dependencies, the claim record and the version guarding it) and returns it as the decision input itself, a [claim.TargetState],
// rather than as a Gitea-shaped copy to be converted. The caller only adds
// what Gitea does not hold (the per-target Lease) before deciding.
//
// # Transport
//
// Calls that the SDK (code.gitea.io/sdk/gitea) serves well go through it; the
// issue read and the guarded PATCH go over plain HTTP because the SDK does not
// expose content_version, and so do the timeline (the SDK cannot decode it) and
// the e-mail search. Both use the same token and, when set, the same Sudo
// user. Every method honours its context.
package giteaclaim
