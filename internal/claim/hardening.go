package claim

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// BranchRule is one branch protection rule of the repository as Gitea reports it.
type BranchRule struct {
	// Name is the rule's branch name or glob pattern.
	Name string
	// EnablePush is whether anybody may push; PushAllowlist, when set, narrows that to
	// the listed logins (PushAllowlistOn says the allowlist is in force).
	EnablePush, PushAllowlistOn bool
	PushAllowlist               []string
}

// GiteaSetup is what the hardening check reads from Gitea: the repository's default
// branch, its protection rules, and the worker identities with their site-admin flag.
type GiteaSetup struct {
	DefaultBranch string
	Rules         []BranchRule
	// Workers maps each worker identity (a login the gateway acts as) to whether Gitea
	// reports it as a site administrator.
	Workers map[string]bool
	// Version is the server's version as it reports it ("" when unknown).
	Version string
}

// MinGiteaVersion is the oldest Gitea release the gateway relies on: 1.27 fixed token
// scopes that older servers did not enforce (GHSA-cp3q-vrj2-ghhh, GHSA-7p4h-3gxq-x3h3,
// CVE-2026-25714), which the worker's read-only token depends on.
const MinGiteaVersion = "1.27.3"

// What a hardening finding is about.
const (
	// FindingWorkerAdmin: a worker identity is a site administrator.
	FindingWorkerAdmin = "WorkerAdmin"
	// FindingOldVersion: the server is older than MinGiteaVersion, or says no version.
	FindingOldVersion = "OldVersion"
	// FindingUnprotected: the default branch is unknown, unprotected, or open to every
	// writer.
	FindingUnprotected = "Unprotected"
	// FindingWorkerMayPush: a worker identity is on the default branch's push allowlist.
	FindingWorkerMayPush = "WorkerMayPush"
)

// Finding is one way a worker could write around the gateway.
type Finding struct {
	// Kind is one of the Finding* constants.
	Kind string
	// Message says what was found, in the terms of docs/gateway.md.
	Message string
}

// CheckHardening lists what in a Gitea setup lets a worker write around the gateway, in
// the terms of docs/gateway.md: the default branch must be protected, only an allowlist
// without worker identities may push to it, and no worker identity may be a site
// administrator (who bypasses every rule). An empty list means nothing was found.
func CheckHardening(s GiteaSetup) []string {
	findings := Hardening(s)
	out := make([]string, 0, len(findings))
	for _, f := range findings {
		out = append(out, f.Message)
	}
	return out
}

// Hardening is CheckHardening with each finding's kind: administrators first (by login),
// then the version, then the default branch's protection.
func Hardening(s GiteaSetup) []Finding {
	var out []Finding
	workers := make([]string, 0, len(s.Workers))
	for w := range s.Workers {
		workers = append(workers, w)
	}
	slices.Sort(workers)
	for _, w := range workers {
		if s.Workers[w] {
			out = append(out, Finding{FindingWorkerAdmin, fmt.Sprintf("worker identity %s is a Gitea site administrator: it bypasses branch protection", w)})
		}
	}
	if !versionAtLeast(s.Version, MinGiteaVersion) {
		out = append(out, Finding{FindingOldVersion, fmt.Sprintf("Gitea %q is older than %s, whose token-scope fixes the worker's read-only token relies on", s.Version, MinGiteaVersion)})
	}
	if s.DefaultBranch == "" {
		return append(out, Finding{FindingUnprotected, "the repository's default branch is unknown"})
	}
	var rule *BranchRule
	for i, r := range s.Rules {
		if ok, _ := path.Match(r.Name, s.DefaultBranch); ok || r.Name == s.DefaultBranch {
			rule = &s.Rules[i]
			break
		}
	}
	switch {
	case rule == nil:
		out = append(out, Finding{FindingUnprotected, fmt.Sprintf("the default branch %s is not protected: any writer, every worker identity among them, can push to it", s.DefaultBranch)})
	case rule.EnablePush && !rule.PushAllowlistOn:
		out = append(out, Finding{FindingUnprotected, fmt.Sprintf("the protection of %s lets every writer push to it, every worker identity among them", s.DefaultBranch)})
	case rule.EnablePush:
		for _, w := range workers {
			if slices.ContainsFunc(rule.PushAllowlist, func(l string) bool { return strings.EqualFold(l, w) }) {
				out = append(out, Finding{FindingWorkerMayPush, fmt.Sprintf("worker identity %s may push to %s (push allowlist)", w, s.DefaultBranch)})
			}
		}
	}
	return out
}

// VersionSupported says whether a server reporting version is at least MinGiteaVersion.
func VersionSupported(version string) bool { return versionAtLeast(version, MinGiteaVersion) }

// versionAtLeast reports whether version (as Gitea reports it: "1.27.3", "v1.28.0-dev+12")
// is at least min, by semantic-version precedence (a pre-release is older than its
// release); an unreadable version is not.
func versionAtLeast(version, min string) bool {
	canon := func(v string) string {
		v = strings.TrimSpace(v)
		if !strings.HasPrefix(v, "v") {
			v = "v" + v
		}
		return v
	}
	have, want := canon(version), canon(min)
	return semver.IsValid(have) && semver.IsValid(want) && semver.Compare(have, want) >= 0
}
