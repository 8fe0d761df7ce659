package manifests

import (
	"slices"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/giteatools/fleet-controller/internal/claim"
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

// The TaskClaim CRD's phase enum is exactly claim.Phases, and it serves the field
// selectors the controller lists claims by: a phase added to one and not the other would
// slip past the selector of claims without an identity key.
func TestTaskClaimPhasesAndSelectableFields(t *testing.T) {
	objs, err := Objects("../../config/crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetName() != "taskclaims.fleet.giteatools.dev" {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			enum, _, _ := unstructured.NestedStringSlice(v.(map[string]any),
				"schema", "openAPIV3Schema", "properties", "status", "properties", "phase", "enum")
			if !slices.Equal(enum, claim.Phases) {
				t.Errorf("status.phase enum %v, claim.Phases %v", enum, claim.Phases)
			}
			fields, _, _ := unstructured.NestedSlice(v.(map[string]any), "selectableFields")
			var paths []string
			for _, f := range fields {
				paths = append(paths, f.(map[string]any)["jsonPath"].(string))
			}
			for _, want := range []string{".spec.worker", ".status.phase", ".status.identityKey"} {
				if !slices.Contains(paths, want) {
					t.Errorf("selectableFields %v lack %s", paths, want)
				}
			}
		}
		return
	}
	t.Fatal("no TaskClaim CRD in config/crd/bases")
}
