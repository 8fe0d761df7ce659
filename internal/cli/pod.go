package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	fleetv1alpha1 "github.com/giteatools/fleet-controller/api/v1alpha1"
)

// The downward API variables a worker pod gives kubectl fleet (config/samples/worker_pod.yaml).
const (
	EnvPodNamespace = "FLEET_POD_NAMESPACE"
	EnvPodName      = "FLEET_POD_NAME"
	EnvPodUID       = "FLEET_POD_UID"
	EnvNodeName     = "FLEET_NODE_NAME"
	// EnvContainerName names the worker's container (the downward API cannot tell it: the
	// pod spec sets it by hand; optional).
	EnvContainerName = "FLEET_CONTAINER_NAME"
)

// hostPIDNamespace is how /proc/<pid>/ns/pid reads in the host's own pid namespace: the
// kernel gives the initial pid namespace a fixed inode number (PROC_PID_INIT_INO).
const hostPIDNamespace = "pid:[4026531836]"

// podOf says which pod process pid runs in. It is nil when pid runs in the host's pid
// namespace. A process in a pid namespace of its own is registered only as a pod's, with
// the pod named by the downward API variables: its pid is a number of that namespace,
// and registered as a host pid it would have the host's process of that number probed
// in its place.
func (o *Options) podOf(pid int64) (*fleetv1alpha1.PodProcess, error) {
	link := filepath.Join(o.procRoot(), "proc", strconv.FormatInt(pid, 10), "ns", "pid")
	ns, err := os.Readlink(link)
	if err != nil {
		return nil, fmt.Errorf("cannot tell which pid namespace process %d runs in (%v): refusing to register a pid whose namespace is unknown", pid, err)
	}
	if ns == hostPIDNamespace {
		return nil, nil
	}
	p := &fleetv1alpha1.PodProcess{
		Namespace: o.Getenv(EnvPodNamespace), Name: o.Getenv(EnvPodName), UID: o.Getenv(EnvPodUID),
		NodeName: o.Getenv(EnvNodeName), Container: o.Getenv(EnvContainerName),
	}
	if p.Namespace == "" || p.Name == "" || p.UID == "" || p.NodeName == "" {
		return nil, usageErrorf("process %d runs in a pid namespace of its own (%s), not the host's: register it from a pod that sets %s, %s, %s and %s through the downward API (see config/samples/worker_pod.yaml)",
			pid, ns, EnvPodNamespace, EnvPodName, EnvPodUID, EnvNodeName)
	}
	return p, nil
}

func (o *Options) procRoot() string {
	if o.ProcRoot == "" {
		return "/"
	}
	return o.ProcRoot
}
