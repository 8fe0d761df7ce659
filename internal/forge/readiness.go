// Package forge decides whether a Gitea server and a repository on it are fit for the
// fleet to work on: the Ready verdicts of GiteaServer and GiteaRepository. It is pure: the
// reconcilers in controllers/giteaserver and controllers/gitearepository read the facts
// (a Secret, Gitea's answers) and write the verdict.
package forge

import (
	"fmt"
	"strings"

	"github.com/giteatools/fleet-controller/internal/claim"
)

// Reasons of the Ready condition of a GiteaServer.
const (
	ReasonConnected          = "Connected"
	ReasonTokenSecretInvalid = "TokenSecretInvalid"
	ReasonCABundleInvalid    = "CABundleInvalid"
	ReasonUnreachable        = "ServerUnreachable"
	ReasonTokenInvalid       = "TokenInvalid"
	ReasonVersionUnsupported = "GiteaVersionUnsupported"
)

// Reasons of the Ready condition of a GiteaRepository.
const (
	ReasonResolved                    = "RepositoryResolved"
	ReasonServerNotFound              = "ServerNotFound"
	ReasonServerNotReady              = "ServerNotReady"
	ReasonRepositoryNotFound          = "RepositoryNotFound"
	ReasonDefaultBranchUnprotected    = "DefaultBranchUnprotected"
	ReasonWorkerCanWriteAroundGateway = "WorkerCanWriteAroundGateway"
	ReasonDuplicateRepository         = "DuplicateRepository"
	ReasonRuleSetUnpublished          = "RuleSetUnpublished"
	ReasonDeleting                    = "Deleting"
)

// Verdict is a Ready condition: its status, reason and message.
type Verdict struct {
	Ready   bool
	Reason  string
	Message string
}

// ServerFacts is what one check of a server found, in the order the check reads it: the
// token Secret, the CA bundle, then Gitea's answers. A step that failed leaves the later
// ones unread.
type ServerFacts struct {
	// TokenProblem says why no token could be read from the Secret ("" when one was).
	TokenProblem string
	// CAProblem says why spec.caBundle is unusable ("" when it is usable or empty).
	CAProblem string
	// Unreachable says why Gitea gave no usable answer ("" when it answered).
	Unreachable string
	// Refused is set when Gitea answered 401 or 403 to the token; RefusedDetail is its
	// answer.
	Refused       bool
	RefusedDetail string
	// Login is the account the token authenticates as; Version is the server's version.
	Login, Version string
}

// JudgeServer decides a server's Ready condition. Every fact must be present and
// positive for Ready: a step the check could not complete is never read as success.
func JudgeServer(f ServerFacts) Verdict {
	switch {
	case f.TokenProblem != "":
		return Verdict{Reason: ReasonTokenSecretInvalid, Message: f.TokenProblem}
	case f.CAProblem != "":
		return Verdict{Reason: ReasonCABundleInvalid, Message: f.CAProblem}
	case f.Unreachable != "":
		return Verdict{Reason: ReasonUnreachable, Message: "Gitea did not answer: " + f.Unreachable}
	case f.Refused:
		return Verdict{Reason: ReasonTokenInvalid, Message: "Gitea refused the token: " + f.RefusedDetail}
	case f.Login == "":
		return Verdict{Reason: ReasonTokenInvalid, Message: "Gitea named no account for the token"}
	case !claim.VersionSupported(f.Version):
		return Verdict{Reason: ReasonVersionUnsupported, Message: fmt.Sprintf(
			"Gitea %q is older than %s, whose token-scope fixes the workers' read-only tokens rely on", f.Version, claim.MinGiteaVersion)}
	}
	return Verdict{Ready: true, Reason: ReasonConnected, Message: fmt.Sprintf("Gitea %s answers as %s", f.Version, f.Login)}
}

// RepositoryFacts is what one check of a repository found. As with ServerFacts, a step
// that failed leaves the later ones unread.
type RepositoryFacts struct {
	// Server is the GiteaServer's name; ServerMissing says it does not exist.
	Server        string
	ServerMissing bool
	// ServerVerdict is the server's Ready condition as its status records it for its
	// current generation (nil: not recorded yet).
	ServerVerdict *Verdict
	// Unreachable says why the repository's read got no usable answer.
	Unreachable string
	// NotFound says the server has no such repository; NotFoundDetail says which.
	NotFound       bool
	NotFoundDetail string
	// Duplicate names an older GiteaRepository of the namespace on the same repository, or
	// on the same owner/name on another server.
	Duplicate string
	// FullName is "owner/name" as Gitea reports it; ID its repository ID.
	FullName string
	ID       int64
	// Setup is what the hardening check read (the default branch, its rules, the worker
	// identities). Nil when it could not be read: SetupProblem says why.
	Setup        *claim.GiteaSetup
	SetupProblem string
	// RuleSetProblem says why the claim rule set in force could not be published to the
	// repository or read back from it unchanged ("" when it was, or was not tried); RuleSet
	// is the digest of the rule set read back ("" when none was).
	RuleSetProblem string
	RuleSet        string
}

// JudgeRepository decides a repository's Ready condition: found, on a Ready server, not a
// duplicate, with a default branch that no worker identity can write to around the
// gateway, and with the claim rule set in force published in it.
func JudgeRepository(f RepositoryFacts) Verdict {
	switch {
	case f.ServerMissing:
		return Verdict{Reason: ReasonServerNotFound, Message: fmt.Sprintf("there is no GiteaServer %q", f.Server)}
	case f.ServerVerdict == nil:
		return Verdict{Reason: ReasonServerNotReady, Message: fmt.Sprintf("the GiteaServer %s has not been checked yet", f.Server)}
	case !f.ServerVerdict.Ready:
		return Verdict{Reason: ReasonServerNotReady, Message: fmt.Sprintf("the GiteaServer %s is not Ready (%s): %s", f.Server, f.ServerVerdict.Reason, f.ServerVerdict.Message)}
	case f.Unreachable != "":
		return Verdict{Reason: ReasonUnreachable, Message: "Gitea did not answer: " + f.Unreachable}
	case f.NotFound:
		return Verdict{Reason: ReasonRepositoryNotFound, Message: f.NotFoundDetail}
	case f.ID <= 0 || f.FullName == "":
		return Verdict{Reason: ReasonRepositoryNotFound, Message: "Gitea's answer named no repository"}
	case f.Duplicate != "":
		return Verdict{Reason: ReasonDuplicateRepository, Message: fmt.Sprintf(
			"the older GiteaRepository %s of this namespace names the same repository as this one (%s, ID %d on %s), or the same owner/name on another server; only it is used", f.Duplicate, f.FullName, f.ID, f.Server)}
	case f.Setup == nil:
		return Verdict{Reason: ReasonUnreachable, Message: "the repository's protection could not be read: " + f.SetupProblem}
	}
	var unprotected, around []string
	for _, finding := range claim.Hardening(*f.Setup) {
		switch finding.Kind {
		case claim.FindingUnprotected:
			unprotected = append(unprotected, finding.Message)
		case claim.FindingOldVersion:
			// The server's own verdict covers its version; a repository is read from a
			// Ready server only.
		default:
			around = append(around, finding.Message)
		}
	}
	switch {
	case len(unprotected) > 0:
		return Verdict{Reason: ReasonDefaultBranchUnprotected, Message: strings.Join(unprotected, "; ")}
	case len(around) > 0:
		return Verdict{Reason: ReasonWorkerCanWriteAroundGateway, Message: strings.Join(around, "; ")}
	case f.RuleSetProblem != "":
		return Verdict{Reason: ReasonRuleSetUnpublished, Message: "the claim rule set in force is not published in the repository: " + f.RuleSetProblem}
	case f.RuleSet != "" && f.RuleSet != claim.RuleSetDigest():
		return Verdict{Reason: ReasonRuleSetUnpublished, Message: fmt.Sprintf(
			"the repository holds the claim rule set %s, not the one in force (%s)", f.RuleSet, claim.RuleSetDigest())}
	}
	return Verdict{Ready: true, Reason: ReasonResolved, Message: fmt.Sprintf(
		"%s (ID %d) on %s; its default branch %s is protected, no worker identity can write around the gateway, and the rule set in force is published", f.FullName, f.ID, f.Server, f.Setup.DefaultBranch)}
}

// JudgeDeletion is the Ready condition of a GiteaRepository being deleted while holding
// claims still hold their Gitea records or locks there: never Ready, so no claim is
// decided there any more, and the message says what the deletion waits for.
func JudgeDeletion(holding int) Verdict {
	return Verdict{Reason: ReasonDeleting, Message: fmt.Sprintf(
		"the GiteaRepository is being deleted: waiting for %d claim(s) in it to end and release their Gitea records and locks", holding)}
}
