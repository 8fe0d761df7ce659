package claim

import (
	"bytes"
	"crypto/sha256"
	_ "embed" // rules.json is embedded
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// RuleSetPath is where the controller publishes rules.json, byte for byte, in
// the Gitea repository it serves.
const RuleSetPath = ".fleet/claim-rules.json"

//go:embed rules.json
var rulesJSON []byte

// Rule is one refusal rule of the published rule set.
type Rule struct {
	// ID is the stable rule id cited by results.
	ID string `json:"id"`
	// Predicate names the condition that failed.
	Predicate string `json:"predicate"`
	// Stage is admit (before anything is read from Gitea), validate, claim or activate:
	// where the rule is evaluated first.
	Stage string `json:"stage"`
	// Class is the failure class.
	Class Class `json:"class"`
	// Blocker is the target blocker ("" for non-target failures).
	Blocker Blocker `json:"blocker"`
	// Message is the fixed message a refusal carries.
	Message string `json:"message"`
	// Description explains the rule to reviewers; it is not sent to workers.
	Description string `json:"description"`
}

// Rules is the parsed rule set file.
type Rules struct {
	// Schema identifies the file format.
	Schema string `json:"schema"`
	// Version is the rule set version; bump it on every change.
	Version string `json:"version"`
	// Description explains the file to reviewers.
	Description string `json:"description"`
	// Classes lists the failure classes the rules may use.
	Classes []Class `json:"classes"`
	// Blockers lists the blockers the rules may use.
	Blockers []Blocker `json:"blockers"`
	// Rules are the refusal rules.
	Rules []Rule `json:"rules"`
}

// ruleID is the id of a rule, as referenced from code. Every constant of
// this type must exist in rules.json and every rule there must have one.
type ruleID string

// Rule ids used by the decisions.
const (
	ruleWorkerNotRegistered      ruleID = "TC001"
	ruleWorkerRetired            ruleID = "TC002"
	ruleWorkerNotLive            ruleID = "TC003"
	ruleCapabilityDenied         ruleID = "TC004"
	ruleTargetMalformed          ruleID = "TC010"
	ruleWorkerRepositoryMismatch ruleID = "TC011"
	ruleControllerRepoMismatch   ruleID = "TC012"
	ruleWorkerHoldsClaim         ruleID = "TC013"
	ruleWorkerClaimLimit         ruleID = "TC014"
	ruleRepositoryNotReady       ruleID = "TC015"
	ruleRepositoryClaimLimit     ruleID = "TC016"
	ruleTargetStateMismatch      ruleID = "TC020"
	ruleHeadSHAMismatch          ruleID = "TC021"
	ruleTargetStateIncomplete    ruleID = "TC022"
	ruleTargetNotFound           ruleID = "TC023"
	ruleTargetKindMismatch       ruleID = "TC024"
	ruleTargetTerminal           ruleID = "TC030"
	ruleDependencyOpen           ruleID = "TC031"
	ruleTargetBlocked            ruleID = "TC032"
	ruleClaimRecordForeign       ruleID = "TC040"
	ruleLeaseHeldForeign         ruleID = "TC041"
	ruleAssigneeForeign          ruleID = "TC042"
	ruleAuthorIndependence       ruleID = "TC050"
	rulePusherIndependence       ruleID = "TC051"
	ruleIndependenceUnprovable   ruleID = "TC052"
	ruleRoleIndependence         ruleID = "TC053"
	rulePinMissing               ruleID = "TC060"
	rulePinMismatch              ruleID = "TC061"
	ruleTargetSubstituted        ruleID = "TC062"
	ruleRuleSetChanged           ruleID = "TC070"
	ruleWorkerChanged            ruleID = "TC071"
	ruleIdentityChanged          ruleID = "TC072"
	ruleRepositoryBindingChanged ruleID = "TC073"
	ruleCapabilityVerdictChanged ruleID = "TC074"
	ruleHeadSHAMoved             ruleID = "TC075"
	ruleParityRevisionMoved      ruleID = "TC076"
	ruleDependencyStateMoved     ruleID = "TC077"
	ruleRoleMoved                ruleID = "TC078"
	ruleRuleSetUnpublished       ruleID = "TC079"
	ruleClaimGenerationAdvanced  ruleID = "TC080"
	ruleLeaseCASConflict         ruleID = "TC081"
	ruleContentVersionConflict   ruleID = "TC082"
	ruleClaimCASConflict         ruleID = "TC083"
	ruleClaimNotPublished        ruleID = "TC090"
	ruleClaimRecordNotOurs       ruleID = "TC091"
	ruleClaimRecordInactive      ruleID = "TC092"
	ruleLeaseNotHeld             ruleID = "TC093"
)

// loadedRuleSet is the embedded rule set, parsed and indexed once.
type loadedRuleSet struct {
	rules       Rules
	digest      string
	byID        map[string]Rule
	byPredicate map[string]Rule
}

var embedded = mustParseRules(rulesJSON)

func mustParseRules(b []byte) loadedRuleSet {
	l, err := parseRules(b)
	if err != nil {
		// The file is embedded at build time and checked by the tests; a
		// broken file must stop the binary rather than produce decisions.
		panic(fmt.Sprintf("claim: embedded rule set: %v", err))
	}
	return l
}

// Errors reported by ParseRules.
var (
	// ErrRuleSetInvalid wraps every structural problem of a rule set file.
	ErrRuleSetInvalid = errors.New("invalid claim rule set")
)

// ParseRules parses and checks a rule set file: known classes and blockers,
// unique ids and predicates, non-empty fixed messages. It is exported so the
// controller can check the copy it reads back from Gitea.
func ParseRules(b []byte) (Rules, error) {
	l, err := parseRules(b)
	if err != nil {
		return Rules{}, err
	}
	return l.rules, nil
}

func parseRules(b []byte) (loadedRuleSet, error) {
	var rs Rules
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rs); err != nil {
		return loadedRuleSet{}, fmt.Errorf("%w: %w", ErrRuleSetInvalid, err)
	}
	if rs.Version == "" {
		return loadedRuleSet{}, fmt.Errorf("%w: missing version", ErrRuleSetInvalid)
	}
	if len(rs.Rules) == 0 {
		return loadedRuleSet{}, fmt.Errorf("%w: no rules", ErrRuleSetInvalid)
	}
	classes := map[Class]bool{}
	for _, c := range Classes() {
		classes[c] = true
	}
	blockers := map[Blocker]bool{BlockerNone: true}
	for _, bl := range Blockers() {
		blockers[bl] = true
	}
	l := loadedRuleSet{
		rules:       rs,
		byID:        make(map[string]Rule, len(rs.Rules)),
		byPredicate: make(map[string]Rule, len(rs.Rules)),
	}
	for _, r := range rs.Rules {
		switch {
		case r.ID == "" || r.Predicate == "" || r.Message == "":
			return loadedRuleSet{}, fmt.Errorf("%w: rule %q lacks id, predicate or message", ErrRuleSetInvalid, r.ID)
		case !classes[r.Class]:
			return loadedRuleSet{}, fmt.Errorf("%w: rule %s has unknown class %q", ErrRuleSetInvalid, r.ID, r.Class)
		case !blockers[r.Blocker]:
			return loadedRuleSet{}, fmt.Errorf("%w: rule %s has unknown blocker %q", ErrRuleSetInvalid, r.ID, r.Blocker)
		}
		if _, dup := l.byID[r.ID]; dup {
			return loadedRuleSet{}, fmt.Errorf("%w: duplicate rule id %s", ErrRuleSetInvalid, r.ID)
		}
		if _, dup := l.byPredicate[r.Predicate]; dup {
			return loadedRuleSet{}, fmt.Errorf("%w: duplicate predicate %s", ErrRuleSetInvalid, r.Predicate)
		}
		l.byID[r.ID] = r
		l.byPredicate[r.Predicate] = r
	}
	sum := sha256.Sum256(b)
	l.digest = "sha256:" + hex.EncodeToString(sum[:])
	return l, nil
}

// RuleSet returns a copy of the exact embedded rule set bytes (what is
// published at RuleSetPath) and the parsed set.
func RuleSet() ([]byte, Rules) {
	b := bytes.Clone(rulesJSON)
	rs := embedded.rules
	rs.Classes = append([]Class(nil), rs.Classes...)
	rs.Blockers = append([]Blocker(nil), rs.Blockers...)
	rs.Rules = append([]Rule(nil), rs.Rules...)
	return b, rs
}

// RuleSetDigest is "sha256:<hex>" of the exact embedded rule set bytes.
func RuleSetDigest() string { return embedded.digest }

// ruleByPredicate looks a rule up by its predicate.
func ruleByPredicate(predicate string) (Rule, bool) {
	r, ok := embedded.byPredicate[predicate]
	return r, ok
}

// ruleFor returns the rule for id. An id missing from the file (prevented by
// the tests) still fails closed: it yields a policy refusal.
func ruleFor(id ruleID) Rule {
	if r, ok := embedded.byID[string(id)]; ok {
		return r
	}
	return Rule{ID: string(id), Predicate: "rule_missing", Class: ClassPolicy, Message: "The claim rule set is inconsistent; nothing can be claimed."}
}

// RuleSetUnpublished is the final refusal of a validation or claim made while the rule
// set published in the repository is missing or differs from the embedded one: the
// rules a worker can review are not the rules in force, so nothing is decided under
// them. It is a policy refusal and names no other task.
func RuleSetUnpublished(target Target) Result {
	return loss(ruleRuleSetUnpublished, target)
}
