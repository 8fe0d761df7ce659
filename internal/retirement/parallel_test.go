package retirement

import (
	"reflect"
	"runtime"
	"testing"
)

// TestParallelAssessmentMatchesSerial: a registry large enough to be assessed in
// parallel gives exactly the plan a single goroutine gives.
func TestParallelAssessmentMatchesSerial(t *testing.T) {
	in := benchInput(3 * parallelThreshold)
	prev := runtime.GOMAXPROCS(1)
	serial := BuildPlan(in)
	runtime.GOMAXPROCS(4)
	parallel := BuildPlan(in)
	runtime.GOMAXPROCS(prev)
	if !reflect.DeepEqual(serial, parallel) {
		t.Fatal("parallel assessment changed the plan")
	}
	if serial.CandidateCount == 0 || serial.PreservedCount == 0 {
		t.Fatalf("fixture should yield both candidates and preserved rows: %d/%d", serial.CandidateCount, serial.PreservedCount)
	}
}
