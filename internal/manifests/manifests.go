// Package manifests reads the project's plain kustomize resource folders (config/rbac,
// config/admission, ...) as objects, so the embedded control plane and the test suites
// install exactly what a cluster would get.
package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Objects decodes every object of the *.yaml files in dirs, in file-name order.
// kustomization.yaml files and empty documents are skipped.
func Objects(dirs ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					return nil, fmt.Errorf("decoding %s: %w", f, err)
				}
				if len(u.Object) == 0 {
					continue
				}
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// Create creates the objects of dirs that keep accepts (nil keeps all).
func Create(ctx context.Context, c client.Client, keep func(*unstructured.Unstructured) (bool, error), dirs ...string) error {
	objs, err := Objects(dirs...)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if keep != nil {
			ok, err := keep(u)
			if err != nil {
				return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			if !ok {
				continue
			}
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// ClusterScoped keeps the objects the API server says are cluster-scoped (ClusterRoles,
// admission policies, ...): namespaced objects belong to a deployment.
func ClusterScoped(c client.Client) func(*unstructured.Unstructured) (bool, error) {
	return func(u *unstructured.Unstructured) (bool, error) {
		if u.GetNamespace() != "" {
			return false, nil
		}
		namespaced, err := c.IsObjectNamespaced(u)
		return !namespaced, err
	}
}
