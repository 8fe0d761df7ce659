package retirement

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// planOf builds a plan with n candidates and m preserved rows (assessments only).
func planOf(n, m int) Plan {
	p := Plan{Outcome: OutcomePlanned, CandidateCount: n, PreservedCount: m, AssessedCount: n + m}
	for i := range n {
		id := fmt.Sprintf("cand-%06d", i)
		p.CandidateWorkerIdentities = append(p.CandidateWorkerIdentities, id)
		p.Candidates = append(p.Candidates, Assessment{WorkerIdentity: id, ReasonCode: ReasonEligibleStaleOrphan})
	}
	for i := range m {
		p.Preserved = append(p.Preserved, Assessment{WorkerIdentity: fmt.Sprintf("kept-%06d", i), ReasonCode: ReasonWorkerLive})
	}
	return p
}

func TestListPlan(t *testing.T) {
	tests := []struct {
		name                       string
		candidates, preserved      int
		listedC, listedP, approved int
		messageHas                 string
	}{
		{"small plan lists everything", 3, 2, 3, 2, 3, "Dry run: 3 of 5 registrations are eligible"},
		{"empty plan", 0, 0, 0, 0, 0, "Dry run: 0 of 0"},
		{"many preserved rows: evidence bounded", 1, MaxListedAssessments + 1, 1, MaxListedAssessments, 1, "counts are complete"},
		{"many candidates: evidence bounded", MaxListedAssessments + 1, 0, MaxListedAssessments, 0, MaxListedAssessments + 1, "counts are complete"},
		{"more candidates than one approval can name", MaxApprovableCandidates + 1, 0, MaxListedAssessments, 0, MaxApprovableCandidates,
			"more than the 2000 one approval can name"},
	}
	for _, tt := range tests {
		p := planOf(tt.candidates, tt.preserved)
		l := ListPlan(p)
		if len(l.Candidates) != tt.listedC || len(l.Preserved) != tt.listedP || len(l.ApprovableIdentities) != tt.approved {
			t.Errorf("%s: listed %d candidates, %d preserved, %d approvable; want %d, %d, %d", tt.name,
				len(l.Candidates), len(l.Preserved), len(l.ApprovableIdentities), tt.listedC, tt.listedP, tt.approved)
		}
		if !strings.Contains(l.Message, tt.messageHas) {
			t.Errorf("%s: message %q lacks %q", tt.name, l.Message, tt.messageHas)
		}
		if !slices.Equal(l.ApprovableIdentities, p.CandidateWorkerIdentities[:len(l.ApprovableIdentities)]) {
			t.Errorf("%s: approvable identities are not the first candidates", tt.name)
		}
	}
}

func TestJudgeApply(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name               string
		rep                ApplyReport
		succeeded, applied bool
		success            bool
		complete           *bool
		reason             string
	}{
		{"clean apply", ApplyReport{Outcome: OutcomeApplied, RetiredCount: 2}, true, true, true, &yes, ConditionApplySucceeded},
		{"clean apply retiring nothing", ApplyReport{Outcome: OutcomeApplied}, true, true, true, &yes, ConditionApplySucceeded},
		{"partial apply", ApplyReport{Outcome: OutcomeApplied, RetiredCount: 1, Interrupted: true, Detail: "fence moved"}, false, false, false, &no, ConditionApplyPartial},
		{"already retired", ApplyReport{Outcome: OutcomeAlreadyRetired}, true, false, true, nil, ConditionNothingToApply},
		{"nothing requested", ApplyReport{Outcome: OutcomeNothingRequested}, true, false, true, nil, ConditionNothingToApply},
		{"registry moved", ApplyReport{Outcome: OutcomeRegistryRevisionMoved}, false, false, true, nil, ConditionApplyRefused},
		{"candidates moved", ApplyReport{Outcome: OutcomeCandidateSetMoved}, false, false, true, nil, ConditionApplyRefused},
		{"transaction failed", ApplyReport{Outcome: OutcomeTransactionFailed, Detail: "boom"}, false, false, false, nil, ConditionApplyFailed},
		{"interrupted apply completed by a takeover", ApplyReport{Outcome: OutcomeApplied, RetiredCount: 2, Interrupted: true, Recovered: true, Detail: "stopped"},
			false, false, false, &no, ConditionApplyInterrupted},
		{"interrupted apply completed by a takeover, every row retired", ApplyReport{Outcome: OutcomeApplied, RetiredCount: 5, Interrupted: true, Recovered: true},
			false, false, false, &no, ConditionApplyInterrupted},
		{"interrupted apply that retired nothing", ApplyReport{Outcome: OutcomeTransactionFailed, Interrupted: true, Recovered: true},
			false, false, false, &no, ConditionApplyInterrupted},
	}
	for _, tt := range tests {
		v := JudgeApply(tt.rep)
		if v.Succeeded != tt.succeeded || v.Applied != tt.applied || v.Success != tt.success || v.Reason != tt.reason {
			t.Errorf("%s: JudgeApply = %+v, want succeeded=%v applied=%v success=%v reason=%s", tt.name, v, tt.succeeded, tt.applied, tt.success, tt.reason)
		}
		if (v.Complete == nil) != (tt.complete == nil) || (v.Complete != nil && *v.Complete != *tt.complete) {
			t.Errorf("%s: applyComplete = %v, want %v", tt.name, v.Complete, tt.complete)
		}
		if v.Message == "" {
			t.Errorf("%s: no message", tt.name)
		}
	}
}
