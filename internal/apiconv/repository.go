package apiconv

import (
	"k8s.io/apimachinery/pkg/api/meta"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
	"github.com/giteatools/fleet-controller/internal/forge"
)

// Candidate is what resolving a repository (forge.Resolve, forge.Bind) reads of repo:
// its Ready condition counts only when it was written for the current generation. Deleting repo advances its generation (the API
// server does so when it sets the deletion timestamp of an object with finalizers), so
// from that moment nothing is decided there, whatever its last check said.
func Candidate(repo *fleetv1alpha1.GiteaRepository) forge.Candidate {
	c := forge.Candidate{Object: repo.Name, Server: repo.Spec.Server, Owner: repo.Spec.Owner, Repo: repo.Spec.Name,
		ID: repo.Status.RepositoryID, RuleSetDigest: repo.Status.RuleSetDigest}
	if m := repo.Spec.MaxActiveClaims; m != nil {
		c.MaxActiveClaims = *m
	}
	if cond := meta.FindStatusCondition(repo.Status.Conditions, fleetv1alpha1.ReadyCondition); cond != nil {
		c.Reason, c.Message = cond.Reason, cond.Message
		c.Ready = cond.Status == "True" && cond.ObservedGeneration == repo.Generation
	}
	return c
}
