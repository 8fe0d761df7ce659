package manifests

import (
	"sort"
	"testing"
)

// The project's own folders decode into the objects a cluster would get.
func TestObjectsOfTheProjectManifests(t *testing.T) {
	objs, err := Objects("../../config/rbac", "../../config/admission")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" || u.GetKind() == "ValidatingAdmissionPolicy" {
			names = append(names, u.GetName())
		}
	}
	sort.Strings(names)
	for _, want := range []string{"fleet-controller", "fleet-retirement-approver", "fleet-retirement-planner", "fleet-worker",
		"fleet-retirementplan-approval", "fleet-taskclaim-owner", "fleet-workerregistration-guard", "fleet-worker-token"} {
		if i := sort.SearchStrings(names, want); i >= len(names) || names[i] != want {
			t.Errorf("%s not found in %v", want, names)
		}
	}
	for _, u := range objs {
		if u.GetKind() == "Kustomization" || u.GetKind() == "" {
			t.Errorf("non-resource document decoded: %v", u.Object)
		}
	}
}

func TestObjectsOfAMissingFolderIsEmpty(t *testing.T) {
	objs, err := Objects(t.TempDir())
	if err != nil || len(objs) != 0 {
		t.Fatalf("Objects(empty) = %v, %v", objs, err)
	}
}
