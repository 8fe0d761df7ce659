package retirementplan

import (
	"testing"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

func TestViewMemoAnswersOnlyTheExactViewOnce(t *testing.T) {
	var m viewMemo
	rows := []fleetv1alpha1.WorkerRegistration{{}, {}}
	if _, ok := m.take("ns", "7"); ok {
		t.Fatal("an empty memo answered")
	}
	m.keep("ns", "7", rows)
	for _, miss := range []struct{ ns, rv string }{{"ns", "8"}, {"other", "7"}, {"ns", ""}} {
		if _, ok := m.take(miss.ns, miss.rv); ok {
			t.Errorf("the view of ns at 7 answered a list of %s at %q", miss.ns, miss.rv)
		}
	}
	got, ok := m.take("ns", "7")
	if !ok || len(got) != 2 {
		t.Fatalf("the view of ns at 7: %d rows, %v; want its 2 rows", len(got), ok)
	}
	if _, ok := m.take("ns", "7"); ok {
		t.Error("the view answered twice: a second reader must list from the API server")
	}
	m.keep("ns", "7", rows)
	m.keep("ns", "9", rows[:1])
	if _, ok := m.take("ns", "7"); ok {
		t.Error("a newer fan-out's view did not replace the older one")
	}
	if got, ok := m.take("ns", "9"); !ok || len(got) != 1 {
		t.Errorf("the newest view: %d rows, %v", len(got), ok)
	}
}
