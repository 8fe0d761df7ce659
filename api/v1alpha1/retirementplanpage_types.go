package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lists a RetirementPlanPage can hold (list).
const (
	PageListCandidates = "Candidates"
	PageListPreserved  = "Preserved"
)

// PlanLabel names the RetirementPlan a RetirementPlanPage belongs to:
// `kubectl get retirementplanpages -l fleet.giteatools.dev/plan=NAME` lists its pages.
// A name longer than a label value may be is shortened to its first 54 characters and a
// hash; the plan's status.pages.selector always names the value to use.
const PlanLabel = "fleet.giteatools.dev/plan"

// RetirementPlanPage holds one page of a RetirementPlan's per-row verdicts.
//
// A plan's status lists at most the first 500 candidates and 500 preserved rows, so that
// it stays far below etcd's object size limit at any fleet size; its counts are always
// complete. The full list, every row with its reason code, detail and evidence, is kept
// in pages owned by the plan (like EndpointSlices for a Service): written by the
// controller with the plan, never by users, and deleted with the plan. Pages are a
// report, not an input: approving and applying a plan never reads them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rpage
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.plan`
// +kubebuilder:printcolumn:name="List",type=string,JSONPath=`.list`
// +kubebuilder:printcolumn:name="Page",type=integer,JSONPath=`.page`
// +kubebuilder:printcolumn:name="Of",type=integer,JSONPath=`.pageCount`
// +kubebuilder:printcolumn:name="Rows",type=integer,JSONPath=`.rowCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RetirementPlanPage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// plan is the name of the RetirementPlan this page belongs to (same namespace).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Plan string `json:"plan"`

	// planUID is the UID of that RetirementPlan, so a page of a deleted plan is never
	// read as one of a new plan of the same name.
	// +required
	// +kubebuilder:validation:MaxLength=64
	PlanUID string `json:"planUID"`

	// list is the list this page is part of: Candidates (status.candidates in full) or
	// Preserved (status.preserved in full).
	// +required
	// +kubebuilder:validation:Enum=Candidates;Preserved
	List string `json:"list"`

	// page is this page's number, from 1; rows are sorted by name across the pages of a
	// list.
	// +required
	// +kubebuilder:validation:Minimum=1
	Page int32 `json:"page"`

	// pageCount is the number of pages of this list.
	// +required
	// +kubebuilder:validation:Minimum=1
	PageCount int32 `json:"pageCount"`

	// rowCount is the number of rows on this page.
	// +required
	// +kubebuilder:validation:Minimum=0
	RowCount int32 `json:"rowCount"`

	// rows are the verdicts on this page, sorted by workerIdentity.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Rows []WorkerAssessment `json:"rows,omitempty"`
}

// RetirementPlanPageList is a list of RetirementPlanPage.
//
// +kubebuilder:object:root=true
type RetirementPlanPageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RetirementPlanPage `json:"items"`
}

// RetirementPlanPages says where a plan's full per-row detail is.
type RetirementPlanPages struct {
	// candidates is the number of Candidates pages.
	Candidates int32 `json:"candidates"`
	// preserved is the number of Preserved pages.
	Preserved int32 `json:"preserved"`
	// selector lists the pages: kubectl get retirementplanpages -l SELECTOR.
	Selector string `json:"selector"`
}
