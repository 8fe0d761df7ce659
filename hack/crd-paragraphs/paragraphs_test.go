package main

import "testing"

func TestParagraphs(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"one line stays", "phase is Active.", "phase is Active."},
		{"wrapped sentence joins", "binding says what the approval binds, and so what\nmust not have changed.",
			"binding says what the approval binds, and so what must not have changed."},
		{"blank line separates paragraphs", "First part\ncontinues.\n\nSecond part\ncontinues.",
			"First part continues.\n\nSecond part continues."},
		{"list items keep their lines", "Outcomes:\n- applied\n- planned, when\n  nothing was approved",
			"Outcomes:\n- applied\n- planned, when\n  nothing was approved"},
		{"numbered items keep their lines", "Steps\n1. read\n2) write", "Steps\n1. read\n2) write"},
		{"a colon mid-sentence joins", "binds the registry:\nregistryFingerprint is required", "binds the registry: registryFingerprint is required"},
		{"code block keeps its lines", "Example\n  kubectl get rp\n  kubectl get wr", "Example\n  kubectl get rp\n  kubectl get wr"},
		{"a version number is not a list item", "Defaults to\n1.5 MiB.", "Defaults to 1.5 MiB."},
		{"leading spaces of a joined line go", "a\n b", "a b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Paragraphs(c.in); got != c.want {
				t.Errorf("Paragraphs(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

func TestReflowDescriptionsLeavesPropertiesNamedDescription(t *testing.T) {
	doc := map[string]any{
		"description": "a\nb",
		"properties": map[string]any{
			"description": map[string]any{"description": "c\nd", "type": "string"},
		},
	}
	reflowDescriptions(doc)
	if doc["description"] != "a b" {
		t.Errorf("top description = %q", doc["description"])
	}
	prop := doc["properties"].(map[string]any)["description"].(map[string]any)
	if prop["description"] != "c d" || prop["type"] != "string" {
		t.Errorf("property named description = %v", prop)
	}
}
