// Package v1alpha1 contains the fleet.giteatools.dev/v1alpha1 API: WorkerRegistration,
// RetirementPlan and TaskClaim.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.giteatools.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "fleet.giteatools.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types of this group-version to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
