package crd_test

import (
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A doc comment wrapped in the Go source must reach kubectl explain as whole paragraphs:
// kubectl keeps every line break it is served and wraps again at 80 columns, so a break
// left mid-sentence shows as a ragged, broken line.
var _ = Describe("API documentation", func() {
	It("serves every description as whole paragraphs", func() {
		s := runtime.NewScheme()
		Expect(apiextensionsv1.AddToScheme(s)).To(Succeed())
		c, err := client.New(env.Config, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
		var crds apiextensionsv1.CustomResourceDefinitionList
		Expect(c.List(ctx, &crds)).To(Succeed())
		// A kept break is a paragraph break, or one before a list item or an indented line.
		structural := regexp.MustCompile(`^(\s*$|\s*([-*]|\d+[.)]) |  |\t)`)
		checked := 0
		for _, crd := range crds.Items {
			if !strings.HasSuffix(crd.Name, ".fleet.giteatools.dev") {
				continue
			}
			for _, v := range crd.Spec.Versions {
				walkDescriptions("", v.Schema.OpenAPIV3Schema, func(path, d string) {
					checked++
					lines := strings.Split(d, "\n")
					for i := 1; i < len(lines); i++ {
						if strings.TrimSpace(lines[i-1]) == "" {
							continue
						}
						Expect(structural.MatchString(lines[i])).To(BeTrue(),
							"%s %s: a line break mid-paragraph before %q", crd.Name, path, lines[i])
					}
				})
			}
		}
		Expect(checked).To(BeNumerically(">", 100), "every kind's schema is documented")
	})

	It("explains a long field as one paragraph", func() {
		text := kubectlExplainRaw("retirementplan.spec.approval.approvedBy")
		// kubectl wraps at 80 columns: a paragraph served as one line comes out as lines of
		// nearly that width, with no short line before its last.
		var body []string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "    ") && strings.TrimSpace(line) != "" {
				body = append(body, line)
			}
		}
		Expect(len(body)).To(BeNumerically(">=", 3), text)
		for _, line := range body[:len(body)-1] {
			Expect(len(line)).To(BeNumerically(">", 60), "a short line mid-paragraph:\n%s", text)
		}
	})
})

// walkDescriptions calls fn with the path and description of every schema node.
func walkDescriptions(path string, p *apiextensionsv1.JSONSchemaProps, fn func(path, d string)) {
	if p == nil {
		return
	}
	if p.Description != "" {
		fn(path, p.Description)
	}
	for name, child := range p.Properties {
		walkDescriptions(path+"."+name, &child, fn)
	}
	if p.Items != nil {
		walkDescriptions(path+"[]", p.Items.Schema, fn)
	}
	if p.AdditionalProperties != nil {
		walkDescriptions(path+"{}", p.AdditionalProperties.Schema, fn)
	}
}
