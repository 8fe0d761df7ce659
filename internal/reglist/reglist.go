/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package reglist lists a namespace's WorkerRegistrations straight from the API server,
// in chunks, with the next chunk's request in flight while the previous chunk is decoded.
//
// A plan reads every registration of its namespace from the API server, never from a
// cache. Read in one request, a large namespace costs one response held whole in memory;
// read in chunks one after the other, it costs the API server's work and the decoding in
// turn, for every chunk. Here the two overlap: as soon as a chunk's bytes have arrived,
// its continue token is read from the end of them (not a decode), the next chunk is asked
// for, and the chunk is decoded meanwhile. At most one chunk waits to be decoded, so the
// memory held stays about two chunks' bytes above the decoded rows.
package reglist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// DefaultChunk is how many registrations one request asks for.
const DefaultChunk = 2000

// Lister lists WorkerRegistrations through a REST client of their group and version.
type Lister struct {
	rest rest.Interface
	// Chunk is how many registrations one request asks for (DefaultChunk when 0).
	Chunk int64
}

// New is a Lister for the API server cfg names, sharing httpClient's connections.
func New(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme) (*Lister, error) {
	codecs := serializer.NewCodecFactory(scheme)
	gvk := fleetv1alpha1.GroupVersion.WithKind("WorkerRegistrationList")
	rc, err := apiutil.RESTClientForGVK(gvk, true, false, cfg, codecs, httpClient)
	if err != nil {
		return nil, fmt.Errorf("a REST client for worker registrations: %w", err)
	}
	return &Lister{rest: rc}, nil
}

// List returns every registration of namespace as the API server holds it now, without
// managedFields; see ListAt.
func (l *Lister) List(ctx context.Context, namespace string) ([]fleetv1alpha1.WorkerRegistration, error) {
	items, _, err := l.ListAt(ctx, namespace, "")
	return items, err
}

// ListAt returns every registration of namespace at resourceVersion (the newest when
// empty), and the resourceVersion of the view read, without managedFields (read by
// nothing that plans or applies, and a large part of each row). A resourceVersion is
// matched exactly: the API server answers 410 Gone (apierrors.IsResourceExpired) once
// it has compacted that revision. Every chunk is read at the resourceVersion of the
// first, as the continue token carries it, so the rows are one consistent view; an
// expired token (410 Gone) fails the whole list.
func (l *Lister) ListAt(ctx context.Context, namespace, resourceVersion string) ([]fleetv1alpha1.WorkerRegistration, string, error) {
	chunk := l.Chunk
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	type fetched struct {
		raw  []byte
		next string // the continue token the next request was made with
		rv   string // the view's resourceVersion
	}
	raws := make(chan fetched, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(raws)
		opts := metav1.ListOptions{Limit: chunk}
		if resourceVersion != "" {
			opts.ResourceVersion, opts.ResourceVersionMatch = resourceVersion, metav1.ResourceVersionMatchExact
		}
		for {
			raw, err := l.rest.Get().Namespace(namespace).Resource("workerregistrations").
				VersionedParams(&opts, metav1.ParameterCodec).
				Do(gctx).Raw()
			if err != nil {
				return fmt.Errorf("listing worker registrations: %w", err)
			}
			meta, err := listMeta(raw)
			if err != nil {
				return fmt.Errorf("listing worker registrations: reading the list's metadata: %w", err)
			}
			select {
			case raws <- fetched{raw: raw, next: meta.Continue, rv: meta.ResourceVersion}:
			case <-gctx.Done():
				return gctx.Err()
			}
			if meta.Continue == "" {
				return nil
			}
			// The token carries the view's resourceVersion.
			opts = metav1.ListOptions{Limit: chunk, Continue: meta.Continue}
		}
	})
	var items []fleetv1alpha1.WorkerRegistration
	view := ""
	g.Go(func() error {
		for f := range raws {
			list := &fleetv1alpha1.WorkerRegistrationList{}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(f.raw, list); err != nil {
				return fmt.Errorf("listing worker registrations: decoding a chunk: %w", err)
			}
			if list.Kind != "WorkerRegistrationList" || list.Continue != f.next {
				return fmt.Errorf("listing worker registrations: a chunk of kind %q with continue token %q was read as one with %q",
					list.Kind, list.Continue, f.next)
			}
			if view == "" {
				view = list.ResourceVersion
			}
			if list.ResourceVersion != f.rv || list.ResourceVersion != view {
				return fmt.Errorf("listing worker registrations: a chunk at resourceVersion %q was read as one at %q of a view at %q",
					list.ResourceVersion, f.rv, view)
			}
			for i := range list.Items {
				list.Items[i].ManagedFields = nil
			}
			if items == nil {
				items = list.Items
				continue
			}
			items = append(items, list.Items...)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	return items, view, nil
}

// metadataKey is how a JSON object member named metadata begins.
var metadataKey = []byte(`"metadata":`)

// listMeta reads a list's metadata (continue token, resourceVersion) without decoding
// the list. The API server writes a list's members in the order of their names, so its
// metadata comes last, after the items: it is found by decoding the last "metadata"
// member, provided that only the list's closing brace follows it (so it is the list's
// own, not an item's). Should the tail not look so, the whole document is scanned
// instead. Either way the chunk's full decode checks both again.
func listMeta(raw []byte) (metav1.ListMeta, error) {
	var meta metav1.ListMeta
	if i := bytes.LastIndex(raw, metadataKey); i >= 0 {
		dec := json.NewDecoder(bytes.NewReader(raw[i+len(metadataKey):]))
		if dec.Decode(&meta) == nil {
			tail := bytes.TrimSpace(raw[i+len(metadataKey)+int(dec.InputOffset()):])
			if len(tail) == 1 && tail[0] == '}' {
				return meta, nil
			}
		}
	}
	var head struct {
		Metadata metav1.ListMeta `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return metav1.ListMeta{}, err
	}
	return head.Metadata, nil
}
