module k8s.io/kubernetes

go 1.25.0

require (
	github.com/spf13/cobra v1.9.1
	k8s.io/api v0.0.0
	k8s.io/apimachinery v0.0.0
	k8s.io/client-go v0.0.0
	k8s.io/utils v0.0.0-20250820121507-0af2bda4dd1d
)

require k8s.io/kubectl v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
	k8s.io/utils => k8s.io/utils v0.0.0-20250820121507-0af2bda4dd1d
)

replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
