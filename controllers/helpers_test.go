package controllers_test

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// discardRecorder drops events (for reconcilers driven by hand).
type discardRecorder struct{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
}
