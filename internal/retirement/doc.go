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

// Package retirement decides which worker registrations may be retired.
//
// It implements the plan → approve → apply workflow's pure half: given the
// registry rows, the host the controller runs on, process probe results and
// the set of workers that currently hold a task claim, BuildPlan assesses every
// row against an ordered chain of checks and either selects it as a
// candidate (eligible_stale_orphan) or preserves it with exactly one reason
// code. BuildPlan also computes two stable compare-and-swap tokens:
//
//   - the registry fingerprint, over the retirement-relevant content of
//     every row (see FingerprintFields), independent of listing order and of
//     the time the registry is observed;
//   - the candidate fingerprint, over the selected rows and the canonical
//     repository.
//
// The apply side is split into small pure decisions that the controller
// calls between its reads and writes: DecideApply (token comparison and
// revalidation of the approved identities), RecheckBeforeWrite (per-row
// liveness re-probe right before the guarded update) and Summarize (the
// final outcome, never reporting an interrupted run as a clean one).
//
// Nothing here performs I/O, reads the clock or imports the Kubernetes API
// types; the controller converts its objects into Row, Probe and Input.
package retirement
