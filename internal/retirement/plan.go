/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package retirement

import (
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/giteatools/fleet-controller/internal/fleet"
)

// candidateDetail is the detail text of every eligible row.
const candidateDetail = "every eligibility check passed: the registration is a stale orphan whose process is provably gone"

// procKey is a process identity: which machine, which boot, which pid, and, for a pod's
// process, which pod (its pid is a number of the pod's own pid namespace, so two pods'
// workers may well share it).
type procKey struct {
	host, boot, pod string
	pid             int64
}

// cidKey is a (clientInstanceID, workerNamespace) pair.
type cidKey struct {
	cid, ns string
}

// bucket remembers how many possibly-live rows carry one key and the two of
// them that come first in canonical order, which is all a conflict check
// needs to find "another" row and name it deterministically, whatever the
// order in which rows were indexed.
type bucket struct {
	n      int32
	a, b   int32 // row indexes
	ra, rb int32 // their canonical ranks
}

func (b *bucket) add(i, rank int32) {
	switch {
	case b.n == 0:
		b.a, b.ra = i, rank
	case rank < b.ra:
		b.b, b.rb = b.a, b.ra
		b.a, b.ra = i, rank
	case b.n == 1 || rank < b.rb:
		b.b, b.rb = i, rank
	}
	b.n++
}

// planner holds the input and the cross-row indexes used by the checks.
type planner struct {
	in           *Input
	canonRepo    string
	canonRepoOK  bool
	canonBinding string
	owners       map[string]struct{}
	procIdx      map[procKey]bucket
	sessIdx      map[string]bucket
	genIdx       map[string]bucket
	cidIdx       map[cidKey]bucket
	ctx          []rowContext
	notes        []evidenceEntry // failure-specific evidence of the row being assessed
	text         []byte          // arena for per-row formatted text, see BuildPlan
}

// others returns the names of possibly-live rows in b other than rc's own
// row, or "" when there are none.
func (p *planner) others(b bucket, rc *rowContext) string {
	n := b.n
	self := rc.mayBeLive // a possibly-live row was indexed under its own keys
	if self {
		n--
	}
	if n <= 0 {
		return ""
	}
	first := b.a
	if self && first == rc.idx {
		first = b.b
	}
	name := strconv.Quote(p.in.Rows[first].Name)
	if n > 1 {
		name += " and " + strconv.Itoa(int(n-1)) + " more"
	}
	return name
}

func procKeyOf(r *Row) (procKey, bool) {
	if blank(r.HostID) || r.PID <= 0 {
		return procKey{}, false
	}
	return procKey{r.HostID, r.BootID, r.PodUID, r.PID}, true
}

// BuildPlan assesses every row of in and returns the read-only plan.
//
// BuildPlan is deterministic: the same Input always yields the same Plan,
// whatever the order of in.Rows, in.ActiveWorkflowOwners or the iteration
// order of in.Probes. The registry fingerprint depends on the rows alone,
// never on Now, probes or task claims; the candidate fingerprint depends on
// which rows were selected (and so on Now) and the canonical repository.
func BuildPlan(in Input) Plan {
	rows := in.Rows
	n := len(rows)
	p := &planner{
		in:           &in,
		canonRepo:    normalizeRepository(in.CanonicalRepository),
		canonBinding: normalizeRepository(in.CanonicalBinding),
		owners:       make(map[string]struct{}, len(in.ActiveWorkflowOwners)),
		ctx:          make([]rowContext, n),
		text:         make([]byte, 0, 32*n),
	}
	p.canonRepoOK = isCanonicalRepository(p.canonRepo)
	for _, o := range in.ActiveWorkflowOwners {
		p.owners[o] = struct{}{}
	}

	// Derive per-row facts once and encode the row for the fingerprints in
	// the same pass, while its data is in cache.
	enc := newEncodedRows(n)
	possiblyLive := 0
	for i := range rows {
		rc := &p.ctx[i]
		rc.p, rc.idx, rc.row = p, int32(i), &rows[i]
		p.derive(rc)
		enc.add(rc.row, rc.ttl)
		if rc.mayBeLive {
			possiblyLive++
		}
	}
	// Per-row formatted text was appended to one arena; turning it into a
	// single string and slicing it saves one allocation per row.
	arena := string(p.text)
	p.text = nil
	for i := range p.ctx {
		rc := &p.ctx[i]
		rc.expiryText = arena[rc.expiryStart:rc.expiryEnd]
	}
	p.procIdx = make(map[procKey]bucket, possiblyLive)
	p.sessIdx = make(map[string]bucket, possiblyLive)
	p.genIdx = make(map[string]bucket, possiblyLive)
	p.cidIdx = make(map[cidKey]bucket, possiblyLive)

	// Canonical order and the registry fingerprint.
	order := enc.sortedOrder(rows)
	plan := Plan{
		Outcome:               OutcomePlanned,
		RegistryFingerprint:   enc.hash(registryDomain, nil, order),
		CanonicalRepository:   p.canonRepo,
		CanonicalBinding:      p.canonBinding,
		PreservedReasonCounts: map[string]int{},
		AssessedCount:         n,
		ReadOnly:              true,
	}

	// Canonical rank of every row; rows sharing a name are adjacent in
	// canonical order, so they are counted without a map.
	for pos, i := range order {
		p.ctx[i].rank = int32(pos)
	}
	for k := 0; k < len(order); {
		j := k + 1
		for j < len(order) && rows[order[j]].Name == rows[order[k]].Name {
			j++
		}
		for m := k; m < j; m++ {
			p.ctx[order[m]].sameName = j - k
		}
		k = j
	}

	// Cross-row indexes. Rows are visited in input order (sequential
	// memory access); buckets keep the lowest canonical ranks, so the row a
	// conflict detail names does not depend on that order.
	for i := range p.ctx {
		rc := &p.ctx[i]
		if !rc.mayBeLive {
			continue
		}
		r, idx, rank := rc.row, int32(i), rc.rank
		if k, ok := procKeyOf(r); ok {
			b := p.procIdx[k]
			b.add(idx, rank)
			p.procIdx[k] = b
		}
		if r.SessionID != "" {
			b := p.sessIdx[r.SessionID]
			b.add(idx, rank)
			p.sessIdx[r.SessionID] = b
		}
		if r.GenerationID != "" {
			b := p.genIdx[r.GenerationID]
			b.add(idx, rank)
			p.genIdx[r.GenerationID] = b
		}
		if r.ClientInstanceID != "" {
			k := cidKey{r.ClientInstanceID, r.WorkerNamespace}
			b := p.cidIdx[k]
			b.add(idx, rank)
			p.cidIdx[k] = b
		}
	}

	// Assess, placing each assessment at its canonical rank. Rows are
	// independent once the indexes exist, so large registries are assessed
	// in parallel chunks, each with its own scratch space.
	all := make([]Assessment, n)
	p.assessAll(all)
	nc := 0
	for i := range p.ctx {
		if p.ctx[i].eligible {
			nc++
		}
	}

	// Split, keeping canonical order: candidates move to their own array,
	// preserved assessments are compacted in place.
	plan.Candidates = make([]Assessment, 0, nc)
	plan.CandidateWorkerIdentities = make([]string, 0, nc)
	candOrder := make([]int32, 0, nc)
	w := 0
	for pos, i := range order {
		rc := &p.ctx[i]
		a := all[pos]
		if rc.eligible {
			plan.Candidates = append(plan.Candidates, a)
			plan.CandidateWorkerIdentities = append(plan.CandidateWorkerIdentities, a.WorkerIdentity)
			candOrder = append(candOrder, i)
		} else {
			all[w] = a
			w++
			plan.PreservedReasonCounts[a.ReasonCode]++
		}
		if rc.owner && (len(plan.ProtectedActiveWorkflowOwners) == 0 ||
			plan.ProtectedActiveWorkflowOwners[len(plan.ProtectedActiveWorkflowOwners)-1] != a.WorkerIdentity) {
			plan.ProtectedActiveWorkflowOwners = append(plan.ProtectedActiveWorkflowOwners, a.WorkerIdentity)
		}
	}
	clear(all[w:]) // drop references to the moved candidates
	plan.Preserved = all[:w:w]
	plan.CandidateFingerprint = enc.hash(candidateDomain, []string{p.canonBinding}, candOrder)
	plan.CandidateCount = len(plan.Candidates)
	plan.PreservedCount = len(plan.Preserved)
	return plan
}

// derive computes the per-row facts the checks and the indexes rely on.
func (p *planner) derive(rc *rowContext) {
	r := rc.row
	rc.ttl = newTTLText(r.HeartbeatTTLSeconds)
	if rc.ttl.valid {
		rc.ttlPositive = rc.ttl.text != "0" && rc.ttl.text[0] != '-'
		if rc.ttlPositive {
			rc.ttlDur = secondsToDuration(rc.ttl.text)
		}
	}
	rc.hb, rc.hbOK = parseHeartbeat(r.LastHeartbeatAt)
	if rc.hbOK && rc.ttlPositive {
		rc.expiry, rc.expiryOK = rc.hb.Add(rc.ttlDur), true
		// Formatted into the shared text arena; see BuildPlan.
		rc.expiryStart = int32(len(p.text))
		p.text = rc.expiry.AppendFormat(p.text, time.RFC3339Nano)
		rc.expiryEnd = int32(len(p.text))
	}
	_, rc.owner = p.owners[r.Name]
	rc.missing = missingIdentityFields(r, rc.ttlPositive)
	if p.in.Probes != nil {
		rc.probe, rc.hasProbe = p.in.Probes[r.Name]
	}
	var probe *Probe
	if rc.hasProbe {
		probe = &rc.probe
	}
	rc.effective, rc.effectiveWhy = effectivePIDState(r, probe, p.in.Host)

	ci := fleet.ClassifyInput{Now: p.in.Now, Phase: r.Phase, HeartbeatTTL: rc.ttlDur, PID: rc.effective}
	if rc.hbOK {
		ci.LastHeartbeatAt = &rc.hb
	}
	rc.classification, _ = fleet.Classify(ci)
	rc.mayBeLive = r.Phase != fleet.Retired &&
		(rc.classification == fleet.Live || rc.effective == fleet.PIDAlive || rc.effective == fleet.PIDUnknown)
}

// parallelThreshold is the registry size from which assessment is spread over
// GOMAXPROCS goroutines.
const parallelThreshold = 4096

// assessAll assesses every row into all (indexed by canonical rank). Each
// goroutine works on a copy of the planner that shares the read-only indexes
// but has its own notes buffer; the result does not depend on the split.
func (p *planner) assessAll(all []Assessment) {
	n := len(p.ctx)
	workers := runtime.GOMAXPROCS(0)
	if n < parallelThreshold || workers < 2 {
		p.assessRange(all, 0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		worker := *p
		worker.notes = nil
		wg.Go(func() { worker.assessRange(all, lo, hi) })
	}
	wg.Wait()
}

// assessRange assesses rows [lo, hi) of the input with this planner's scratch.
func (p *planner) assessRange(all []Assessment, lo, hi int) {
	for i := lo; i < hi; i++ {
		rc := &p.ctx[i]
		rc.p = p
		a := p.assess(rc)
		rc.eligible = a.ReasonCode == ReasonEligibleStaleOrphan
		all[rc.rank] = a
	}
}

// assess runs the check chain, stopping at the first failure, and records
// the evidence.
func (p *planner) assess(rc *rowContext) Assessment {
	p.notes = p.notes[:0]
	a := Assessment{WorkerIdentity: rc.row.Name, ReasonCode: ReasonEligibleStaleOrphan, Detail: candidateDetail}
	for _, c := range checkChain {
		if detail, failed := c.fn(rc); failed {
			a.ReasonCode, a.Detail = c.code, detail
			break
		}
	}
	a.Evidence = p.evidence(rc)
	return a
}

// evidence records the observations every verdict rests on — the
// recomputed classification, the heartbeat expiry, the probe verdict and
// the host and boot ids on both sides — plus the entries noted by the check
// that failed. The map is allocated at its final size; with nothing noted it
// holds eight entries, which Go stores in a single small group.
func (p *planner) evidence(rc *rowContext) map[string]string {
	r, h := rc.row, p.in.Host
	size := 8 + len(p.notes)
	rawState := fleet.PIDUnknown
	if rc.hasProbe {
		rawState = rc.probe.State.Normalize()
		if rc.probe.Detail != "" {
			size++
		}
	}
	if rawState != rc.effective {
		size++
	}
	owner := rc.owner
	if owner {
		size++
	}
	otherBoot := otherBootOf(r, h)
	if otherBoot {
		size++
	}

	ev := make(map[string]string, size)
	ev[EvidenceClassification] = rc.classification
	ev[EvidenceHeartbeatExpiresAt] = rc.expiryText
	switch {
	case !rc.expiryOK:
		ev[EvidenceHeartbeatExpired] = "unknown"
	case p.in.Now.Before(rc.expiry):
		ev[EvidenceHeartbeatExpired] = "false"
	default:
		ev[EvidenceHeartbeatExpired] = "true"
	}
	if rc.hasProbe {
		ev[EvidenceProbeState] = string(rc.probe.State)
		if rc.probe.Detail != "" {
			ev[EvidenceProbeDetail] = rc.probe.Detail
		}
	} else {
		ev[EvidenceProbeState] = "none"
	}
	if rawState != rc.effective {
		ev[EvidenceEffectiveProbeState] = string(rc.effective)
	}
	ev[EvidenceRowHostID] = r.HostID
	ev[EvidenceHostID] = h.HostID
	ev[EvidenceRowBootID] = r.BootID
	ev[EvidenceHostBootID] = h.BootID
	if owner {
		ev[EvidenceActiveWorkflowOwner] = "true"
	}
	if otherBoot {
		ev[EvidenceHostBootTime] = formatBootTime(h.BootTime)
	}
	for _, e := range p.notes {
		ev[e.key] = e.value
	}
	return ev
}
