package controllers_test

import (
	"bytes"
	"errors"
	"io"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// applyFile creates every object of a multi-document YAML file.
func applyFile(path string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			Expect(err).NotTo(HaveOccurred(), path)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "ServiceAccount" || u.GetKind() == "RoleBinding" || u.GetKind() == "Role" {
			continue // namespaced deployment objects of fleet-system are not needed here
		}
		Expect(k8sClient.Create(ctx, u)).To(Succeed(), "%s %s from %s", u.GetKind(), u.GetName(), path)
	}
}

// discardRecorder drops events (for reconcilers driven by hand).
type discardRecorder struct{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
}
