package giteaclaim

import (
	"slices"
	"testing"
)

func TestWithAssignee(t *testing.T) {
	tests := []struct {
		name      string
		assignees []string
		login     string
		add       bool
		want      []string
		changed   bool
	}{
		{"assign to nobody", nil, "alice", true, []string{"alice"}, true},
		{"assign next to others", []string{"bob"}, "alice", true, []string{"bob", "alice"}, true},
		{"already assigned, other case", []string{"Alice"}, "alice", true, []string{"Alice"}, false},
		{"unassign the only one", []string{"alice"}, "alice", false, []string{}, true},
		{"unassign keeps others", []string{"bob", "ALICE", "carol"}, "alice", false, []string{"bob", "carol"}, true},
		{"unassign someone not assigned", []string{"bob"}, "alice", false, []string{"bob"}, false},
		{"unassign from nobody", nil, "alice", false, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := withAssignee(tt.assignees, tt.login, tt.add)
			if changed != tt.changed || !slices.Equal(got, tt.want) {
				t.Fatalf("withAssignee(%v, %q, %v) = %v, %v; want %v, %v", tt.assignees, tt.login, tt.add, got, changed, tt.want, tt.changed)
			}
			if changed && got == nil {
				t.Fatalf("a changed list must not be nil: nil would leave the assignees alone")
			}
		})
	}
}
