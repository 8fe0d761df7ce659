package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Lists a RetirementPlanPage can hold (list).
const (
	PageListCandidates = "Candidates"
	PageListPreserved  = "Preserved"
)

// RetirementPlanPage holds one page of a RetirementPlan's per-row verdicts.
//
// A plan's status lists at most the first 100 candidates and 100 preserved rows, so that
// it stays far below etcd's object size limit at any fleet size; its counts are always
// complete. The full list, every row with its reason code, detail and evidence, is kept
// in pages owned by the plan (like EndpointSlices for a Service): written by the
// controller right after the plan is planned (the plan's PagesReady condition turns True
// when they are complete), never by users, and deleted with the plan. Pages are a
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
// +kubebuilder:validation:XValidation:rule="(has(self.shared) && has(self.shared.reasonCode)) || !has(self.rows) || self.rows.all(r, has(r.reasonCode))",message="every row needs a reasonCode, its own or shared.reasonCode"
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

	// shared is what every row on this page has in common, stored once instead of in each
	// row: the reasonCode and the detail when all rows have the same, and each evidence
	// entry (key and value) that all rows carry. A row's full verdict is its own fields,
	// with shared filling in a reasonCode or detail the row leaves empty and every
	// evidence key the row does not carry.
	// +optional
	Shared *PageShared `json:"shared,omitempty"`

	// rows are the verdicts on this page, sorted by workerIdentity, each without what
	// shared already says.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Rows []PageRow `json:"rows,omitempty"`
}

// PageShared is what every row of a RetirementPlanPage has in common.
type PageShared struct {
	// reasonCode is every row's reason code, when they all have the same.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ReasonCode string `json:"reasonCode,omitempty"`

	// detail is every row's detail, when they all have the same.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Detail string `json:"detail,omitempty"`

	// evidence holds the evidence entries every row carries with the same value.
	// +optional
	Evidence map[string]string `json:"evidence,omitempty"`
}

// PageRow is one row's verdict on a RetirementPlanPage, less what the page's shared block
// holds for every row.
type PageRow struct {
	// workerIdentity is the registration's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	WorkerIdentity string `json:"workerIdentity"`

	// reasonCode is the row's reason code; empty when shared.reasonCode says it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ReasonCode string `json:"reasonCode,omitempty"`

	// detail explains the verdict in one sentence; empty when shared.detail says it, or
	// when the row has none.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Detail string `json:"detail,omitempty"`

	// evidence holds the row's own observations: those shared.evidence does not hold.
	// +optional
	Evidence map[string]string `json:"evidence,omitempty"`
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
