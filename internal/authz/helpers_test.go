package authz

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func runtimeJSON(m map[string]any) ([]byte, error) { return json.Marshal(m) }

type rule struct{ verbs []string }

func unstructuredRules(obj map[string]any) ([]rule, bool, error) {
	raw, found, err := unstructured.NestedSlice(obj, "rules")
	var out []rule
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
		out = append(out, rule{verbs: verbs})
	}
	return out, found, err
}
