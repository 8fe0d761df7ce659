// Command crd-paragraphs rewrites the descriptions of generated CRD manifests so each
// paragraph of a doc comment is one line.
//
// controller-gen keeps the line breaks of the Go source (doc comments are wrapped at
// 88 columns), and kubectl explain wraps again at 80, so an unprocessed description
// reads broken mid-sentence. Built-in types are served with one line per paragraph;
// this gives the project's CRDs the same shape. It runs as the last step of
// `make manifests`, so the committed manifests are always its output.
//
// Usage: crd-paragraphs FILE...
package main

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crd-paragraphs FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crd-paragraphs: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

// rewrite reflows every description in the manifest at path, in place. The manifest
// is controller-gen output: one document, keys sorted, which a round trip through
// sigs.k8s.io/yaml reproduces byte for byte apart from the descriptions.
func rewrite(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	body := bytes.TrimPrefix(raw, []byte("---\n"))
	var doc map[string]any
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return err
	}
	reflowDescriptions(doc)
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	if len(body) != len(raw) {
		out = append([]byte("---\n"), out...)
	}
	if bytes.Equal(out, raw) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

// reflowDescriptions walks a decoded manifest and reflows the value of every
// "description" key that holds a string (a schema's description, never a property
// that happens to be named description: those hold objects).
func reflowDescriptions(node any) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && k == "description" {
				n[k] = Paragraphs(s)
				continue
			}
			reflowDescriptions(v)
		}
	case []any:
		for _, v := range n {
			reflowDescriptions(v)
		}
	}
}
