// Package giteaclaim keeps the authoritative record of a task claim inside
// Gitea and reads the Gitea state a claim decision depends on.
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
// A record is in force while its state is [StateActive] and its expiresAt lies
// in the future. [Client.Clear] ends a record by rewriting its state (released,
// completed, expired or revoked) with the same guarded write; the block stays
// in the body as the last word on that claim until the next claim replaces it.
//
// # Audit trail
//
// Lifecycle transitions are issue comments: a sentence for people followed by
// a `<!-- fleet-claim-audit:v1 {…} -->` line for machines
// ([Client.RecordTransition], [Client.ListTransitions]). Comments have no
// compare-and-swap: callers post a transition only after the guarded body
// write has decided the outcome, and readers should trust only comments
// posted by the controller's own identity ([Transition.Author]).
//
// # Target state
//
// [Client.ReadTarget] gathers what a claim validation needs about an issue or
// pull request (state, author, head, base-branch head, pushers, reviews,
// labels, assignees, dependencies, the claim record) into plain structs that
// do not depend on the Gitea SDK.
//
// # Transport
//
// Calls that the SDK (code.gitea.io/sdk/gitea) serves well go through it; the
// issue read and the guarded PATCH go over plain HTTP because the SDK does not
// expose content_version. Both use the same token and, when set, the same Sudo
// user. Every method honours its context.
package giteaclaim
