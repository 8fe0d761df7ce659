package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiCalls counts the API server's requests by resource, subresource and verb, as its
// apiserver_request_total reports them (every client's: the workers', the manager's).
// Requests for no resource (discovery, /metrics itself) are left out.
type apiCalls map[string]float64

// readAPICalls reads the API server's request counters.
func readAPICalls(ctx context.Context, cfg *rest.Config) (apiCalls, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	out := apiCalls{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		// Counting nothing would print a claim that costs no request: refuse instead.
		return nil, fmt.Errorf("the API server's metrics have no apiserver_request_total")
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["resource"] == "" {
			continue
		}
		key := labels["resource"]
		if s := labels["subresource"]; s != "" {
			key += "/" + s
		}
		out[key+" "+labels["verb"]] += m.GetCounter().GetValue()
	}
	return out, nil
}

func (c apiCalls) minus(o apiCalls) apiCalls {
	out := apiCalls{}
	for k, v := range c {
		if d := v - o[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (c apiCalls) plus(o apiCalls) apiCalls {
	out := maps.Clone(c)
	if out == nil {
		out = apiCalls{}
	}
	for k, v := range o {
		out[k] += v
	}
	return out
}

func (c apiCalls) total() float64 {
	t := 0.0
	for _, v := range c {
		t += v
	}
	return t
}

// describe renders the requests per claim, the most frequent first.
func (c apiCalls) describe(claims int) string {
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, c[k]/float64(claims)))
	}
	return fmt.Sprintf("%.1f: %s", c.total()/float64(claims), strings.Join(parts, ", "))
}
