// Package v1alpha1 contains the fleet.giteatools.dev/v1alpha1 API: WorkerRegistration,
// RetirementPlan and TaskClaim, and the Gitea servers and repositories the fleet works
// on (GiteaServer, GiteaRepository).
//
// +kubebuilder:object:generate=true
// +groupName=fleet.giteatools.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "fleet.giteatools.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this group-version and their lists.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&WorkerRegistration{}, &WorkerRegistrationList{},
		&RetirementPlan{}, &RetirementPlanList{},
		&RetirementPlanPage{}, &RetirementPlanPageList{},
		&TaskClaim{}, &TaskClaimList{},
		&GiteaServer{}, &GiteaServerList{},
		&GiteaRepository{}, &GiteaRepositoryList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
