// Package managercache holds the manager's informer cache settings, so the manager and
// the memory benchmark that sizes its deployment use the same ones.
package managercache

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Options returns the cache options of the manager: informers on the given namespaces
// (all when none is given), and every cached object stripped of its managedFields.
//
// No reconciler reads managedFields, and in a fleet they are a large part of each
// registration: the launcher, the worker's heartbeats and the controller's status each
// own fields, so every row carries three entries. The cache is the manager's memory, and
// the node agent's memory limit is sized from it (see docs/architecture.md).
func Options(namespaces []string) cache.Options {
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	for _, ns := range namespaces {
		if opts.DefaultNamespaces == nil {
			opts.DefaultNamespaces = map[string]cache.Config{}
		}
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts
}
