#!/usr/bin/env bash
# hack/cluster.sh: a real Kubernetes on this one machine, without Docker, kind or a
# registry: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, one
# kube-proxy, and NODES kubelets, each with its own containerd and runc, each in its own
# mount namespace, so that to the cluster they are separate hosts.
#
# Usage:
#   hack/cluster.sh up [NODES]     start (or restart) the cluster, default 2 nodes, and wait
#                                  until every node is Ready
#   hack/cluster.sh load TAR...    import image archives into every node's containerd
#   hack/cluster.sh env            print the export line for kubectl (KUBECONFIG)
#   hack/cluster.sh status         what runs, and the nodes
#   hack/cluster.sh down           stop everything and give the host back as it was
#   hack/cluster.sh reset          down, then forget the cluster (PKI, etcd, images)
#
# Environment:
#   CLUSTER_DIR   state: PKI, etcd, node folders, logs   (default <project>/.cache/cluster)
#   K8S_BIN       the components (default: what hack/k8s.sh provides, built on first use)
#   CLUSTER_IMAGES  image archives imported into each node when it starts
#
# Host packages (Debian): containerd runc containernetworking-plugins nftables iptables
# conntrack openssl curl iproute2 util-linux procps; `hack/cluster.sh up` installs the missing ones
# with apt-get.
#
# How one machine holds several nodes, and what the host keeps:
# - Network: a network namespace of its own (fleet-net) holds the whole cluster: every
#   component runs in it, and so do the bridge fleetbr0 (10.244.0.1/16) that every pod of
#   every node sits on, kube-proxy's nftables tables and the iptables chains kubelet and
#   the CNI plugins add. IPv4 forwarding is on in that namespace only (a per-namespace
#   sysctl, as is bridge-nf-call-iptables, which it needs on), so a pod reaches a
#   Service's ClusterIP and, behind it, a pod on the other node. The API server listens
#   on, and every node reports, 10.244.0.1. Node N hands out 10.244.N.2-254.
# - One veth pair joins the namespace to the host: fleet-host (10.243.0.1/30) on the host,
#   fleet-net0 (10.243.0.2/30) in the namespace. The host keeps two routes on fleet-host,
#   10.244.0.0/16 (pods, the API server) and 10.96.0.0/16 (Services) via 10.243.0.2, so
#   kubectl, the tests and Gitea on the host reach all of it; pods reach the host at
#   10.243.0.1 (where hack/e2e.sh's Gitea servers listen), and nothing else: the namespace
#   has no default route. There is no cluster DNS: pods reach the API server through
#   KUBERNETES_SERVICE_HOST. The host's own sysctls (ip_forward stays as it was), routing
#   table, links and firewall are not touched beyond that link and its two routes.
# - Each node runs containerd and kubelet in a private mount namespace in which three
#   sysctl files kubelet would otherwise rewrite (vm.overcommit_memory, kernel.panic,
#   kernel.panic_on_oops) are covered with files that already hold kubelet's values, and
#   /etc/machine-id is the node's own. The host's sysctls and mount table stay as they
#   were.
# - cgroup v1 only here: kubelet runs with failCgroupV1=false, the cgroupfs driver, and
#   its own cgroupRoot per node (/fleet-node<N>); two kubelets sharing one would kill
#   each other's pods as strays.
# - Root lacks CAP_SYS_RESOURCE here: no negative oom_score_adj anywhere
#   (containerd restrict_oom_score_adj, kubelet oomScoreAdj 0).
# - `down` stops everything, deletes the namespace and the veth pair (the two routes go
#   with it), and removes what a cluster leaves outside its namespace: the symlinks in
#   /var/log/containers, and the cgroups of the nodes.
set -euo pipefail

LIB_LOG_TAG=cluster
# shellcheck source=hack/lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

CLUSTER_DIR=$(realpath -m -- "${CLUSTER_DIR:-$PROJECT_ROOT/.cache/cluster}")
NETNS=fleet-net
NETNS_PATH=/run/netns/$NETNS
BRIDGE=fleetbr0
HOST_IP=10.244.0.1 # the nodes' address, on the bridge, in the namespace
VETH_HOST=fleet-host
VETH_NET=fleet-net0
LINK_HOST_IP=10.243.0.1 # the host, as pods reach it
LINK_NET_IP=10.243.0.2
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
API_URL=https://$HOST_IP:6443
PAUSE_REF=registry.k8s.io/pause:3.10
CNI_BIN=/usr/lib/cni
PKI=$CLUSTER_DIR/pki
PIDS=$CLUSTER_DIR/pids
LOGS=$CLUSTER_DIR/log

# Runs a command in the cluster's network namespace, and nothing else of it changes
# (unlike `ip netns exec`, which also mounts a sysfs of its own over /sys).
IN_NET=(nsenter "--net=$NETNS_PATH" --)

admin_kubeconfig() { echo "$PKI/admin.kubeconfig"; }
kctl() { kubectl --kubeconfig "$(admin_kubeconfig)" "$@"; }

# ---- prerequisites

need_packages() {
  local missing=() p
  for p in containerd:containerd runc:runc ctr:containerd nft:nftables iptables:iptables conntrack:conntrack openssl:openssl curl:curl ip:iproute2 unshare:util-linux nsenter:util-linux sysctl:procps; do
    command -v "${p%%:*}" >/dev/null 2>&1 || missing+=("${p#*:}")
  done
  [[ -x $CNI_BIN/bridge ]] || missing+=(containernetworking-plugins)
  ((${#missing[@]} == 0)) && return 0
  log "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
}

find_binaries() {
  if [[ -z ${K8S_BIN:-} ]]; then
    K8S_BIN=$("$PROJECT_ROOT/hack/k8s.sh" | tail -n1) || die "hack/k8s.sh failed"
  fi
  command -v kubectl >/dev/null || die "no kubectl on PATH"
}

pause_image() {
  local tar=$CLUSTER_DIR/images/pause.tar
  if [[ ! -s $tar ]]; then
    mkdir -p "$CLUSTER_DIR/images"
    log "building the sandbox image $PAUSE_REF"
    (cd "$PROJECT_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$CLUSTER_DIR/images/pause" ./hack/pause &&
      go run ./hack/ociimage -o "$tar" -name "$PAUSE_REF" -entrypoint /pause "$CLUSTER_DIR/images/pause=/pause") ||
      die "building the sandbox image failed"
  fi
  echo "$tar"
}

# ---- PKI: one CA signs every certificate; the service-account key pair signs tokens

sign() { # file-stem CN O [subjectAltName]
  local stem=$1 cn=$2 org=$3 san=${4:-}
  [[ -f $PKI/$stem.crt ]] && return 0
  local ext
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=digitalSignature,keyEncipherment"
    if [[ -n $san ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$stem.key" -out "$PKI/$stem.csr" \
    -subj "/CN=$cn${org:+/O=$org}" 2>/dev/null
  openssl x509 -req -in "$PKI/$stem.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -out "$PKI/$stem.crt" -days 3650 -extfile "$ext" 2>/dev/null
  rm -f "$PKI/$stem.csr" "$ext"
  write_kubeconfig "$stem" >"$PKI/$stem.kubeconfig"
}

write_kubeconfig() { # file-stem
  cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: $API_URL, certificate-authority: $PKI/ca.crt}
users:
- name: $1
  user: {client-certificate: $PKI/$1.crt, client-key: $PKI/$1.key}
contexts:
- name: local
  context: {cluster: local, user: $1}
current-context: local
KC
}

make_pki() {
  mkdir -p "$PKI"
  if [[ ! -f $PKI/ca.crt ]]; then
    log "new cluster: certificates in $PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" \
      -days 3650 -subj "/CN=fleet-local-ca" 2>/dev/null
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  sign apiserver kube-apiserver "" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:$HOST_IP,IP:$API_SERVICE_IP"
  sign admin kubernetes-admin system:masters
  sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  sign controller-manager system:kube-controller-manager ""
  sign scheduler system:kube-scheduler ""
  sign kube-proxy system:kube-proxy ""
}

# ---- processes

start() { # name logfile command...
  local name=$1 out=$2
  shift 2
  running "$name" && return 0
  mkdir -p "$PIDS" "$(dirname -- "$out")"
  setsid "$@" >"$out" 2>&1 </dev/null &
  echo $! >"$PIDS/$name"
  log "$name started (pid $!)"
}

running() { [[ -f $PIDS/$1 ]] && kill -0 "$(<"$PIDS/$1")" 2>/dev/null; }

wait_until() { # seconds what command...
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 1
  done
  die "timed out after ${secs}s waiting for $what (logs: $LOGS)"
}

stop() { # name
  local f=$PIDS/$1 pid i
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 20; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
    log "$1 stopped"
  fi
  rm -f -- "$f"
}

# ---- network: the cluster's namespace, and the one link the host has to it

net_up() {
  [[ -e $NETNS_PATH ]] || ip netns add "$NETNS"
  "${IN_NET[@]}" ip link set lo up
  if ! "${IN_NET[@]}" ip link show "$BRIDGE" >/dev/null 2>&1; then
    "${IN_NET[@]}" ip link add "$BRIDGE" type bridge
    "${IN_NET[@]}" ip addr add "$HOST_IP/16" dev "$BRIDGE"
    "${IN_NET[@]}" ip link set "$BRIDGE" up
  fi
  if ! ip link show "$VETH_HOST" >/dev/null 2>&1; then
    ip link add "$VETH_HOST" type veth peer name "$VETH_NET" netns "$NETNS"
    ip addr add "$LINK_HOST_IP/30" dev "$VETH_HOST"
    ip link set "$VETH_HOST" up
    "${IN_NET[@]}" ip addr add "$LINK_NET_IP/30" dev "$VETH_NET"
    "${IN_NET[@]}" ip link set "$VETH_NET" up
    ip route add "$POD_CIDR" via "$LINK_NET_IP" dev "$VETH_HOST"
    ip route add "$SERVICE_CIDR" via "$LINK_NET_IP" dev "$VETH_HOST"
  fi
  # Both are the namespace's own: /proc/sys/net is the writer's network namespace's.
  "${IN_NET[@]}" sysctl -qw net.ipv4.ip_forward=1
  # A pod's answer through a Service to a pod on the same bridge is bridged, not routed:
  # only bridge netfilter lets conntrack undo the Service's DNAT on it.
  "${IN_NET[@]}" test -e /proc/sys/net/bridge/bridge-nf-call-iptables ||
    die "the br_netfilter module is not loaded (modprobe br_netfilter): pods could not reach each other through Services"
  "${IN_NET[@]}" sysctl -qw net.bridge.bridge-nf-call-iptables=1
}

net_down() {
  # Deleting one end of the pair deletes both, and the host's routes through it.
  if ip link show "$VETH_HOST" >/dev/null 2>&1; then
    ip link del "$VETH_HOST"
  fi
  if [[ -e $NETNS_PATH ]]; then
    ip netns del "$NETNS"
  fi
}

# ---- control plane

control_plane_up() {
  mkdir -p "$CLUSTER_DIR/etcd" "$LOGS"
  start etcd "$LOGS/etcd.log" "${IN_NET[@]}" "$K8S_BIN/etcd" --name local --data-dir "$CLUSTER_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster local=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --quota-backend-bytes 2147483648
  wait_until 60 etcd "${IN_NET[@]}" curl -sf http://127.0.0.1:2381/health
  start kube-apiserver "$LOGS/kube-apiserver.log" "${IN_NET[@]}" "$K8S_BIN/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address "$HOST_IP" --advertise-address "$HOST_IP" --secure-port 6443 \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true --profiling=false --v=1
  wait_until 120 kube-apiserver curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$API_URL/readyz"
  start kube-controller-manager "$LOGS/kube-controller-manager.log" "${IN_NET[@]}" "$K8S_BIN/kube-controller-manager" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --use-service-account-credentials=true \
    --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false --v=1
  start kube-scheduler "$LOGS/kube-scheduler.log" "${IN_NET[@]}" "$K8S_BIN/kube-scheduler" \
    --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false --v=1
  cat >"$CLUSTER_DIR/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
hostnameOverride: node1
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $POD_CIDR
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s, udpTimeout: 0s, udpStreamTimeout: 0s}
KP
  start kube-proxy "$LOGS/kube-proxy.log" "${IN_NET[@]}" "$K8S_BIN/kube-proxy" --config "$CLUSTER_DIR/kube-proxy.yaml" --v=1
}

# ---- nodes

node_up() { # N
  local n=$1 dir=$CLUSTER_DIR/node$1 pause=$2
  local port=$((10250 + (n - 1) * 100)) healthz=$((10248 + (n - 1) * 100)) h
  mkdir -p "$dir"/{containerd,kubelet,cni/net.d,cni/ipam,log,pod-logs,sysctl}
  if [[ ! -f $PKI/node$n.crt ]]; then
    sign "node$n" "system:node:node$n" system:nodes
  fi
  for h in /sys/fs/cgroup/*/; do
    [[ $h == */unified/ ]] || mkdir -p "$h/fleet-node$n"
  done
  cp /sys/fs/cgroup/cpuset/cpuset.cpus /sys/fs/cgroup/cpuset/fleet-node$n/cpuset.cpus
  cp /sys/fs/cgroup/cpuset/cpuset.mems /sys/fs/cgroup/cpuset/fleet-node$n/cpuset.mems
  cat >"$dir/containerd/config.toml" <<TOML
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$dir/containerd/opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_REF"
    disable_apparmor = true
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$CNI_BIN"
      conf_dir = "$dir/cni/net.d"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "$(command -v runc)"
          Root = "$dir/containerd/runc"
TOML
  cat >"$dir/cni/net.d/10-fleet.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "fleet-node$n", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$dir/cni/ipam",
            "ranges": [[{"subnet": "$POD_CIDR", "rangeStart": "10.244.$n.2", "rangeEnd": "10.244.$n.254"}]],
            "routes": [{"dst": "0.0.0.0/0", "gw": "$HOST_IP"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
CNI
  cat >"$dir/kubelet/config.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /fleet-node$n
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
address: $HOST_IP
port: $port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: $dir/pod-logs
failSwapOn: false
oomScoreAdj: 0
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 40
serializeImagePulls: false
KUBELET
  [[ -f $dir/machine-id ]] || printf '%s node%s\n' "$(cat /etc/machine-id)" "$n" | md5sum | cut -c1-32 >"$dir/machine-id"
  echo 1 >"$dir/sysctl/overcommit_memory"
  echo 10 >"$dir/sysctl/panic"
  echo 1 >"$dir/sysctl/panic_on_oops"
  local images="$pause ${CLUSTER_IMAGES:-}"
  cat >"$dir/run.sh" <<RUN
#!/usr/bin/env bash
# node$n: containerd and kubelet in this private mount namespace, in the cluster's
# network namespace.
set -e
mount --bind $dir/sysctl/overcommit_memory /proc/sys/vm/overcommit_memory
mount --bind $dir/sysctl/panic /proc/sys/kernel/panic
mount --bind $dir/sysctl/panic_on_oops /proc/sys/kernel/panic_on_oops
mount --bind $dir/machine-id /etc/machine-id
containerd --config $dir/containerd/config.toml >$dir/log/containerd.log 2>&1 &
echo \$! >$PIDS/containerd-node$n
for i in \$(seq 120); do [ -S $dir/containerd/containerd.sock ] && break; sleep 0.5; done
for t in $images; do ctr --address $dir/containerd/containerd.sock -n k8s.io images import "\$t" >>$dir/log/import.log 2>&1; done
$K8S_BIN/kubelet --config $dir/kubelet/config.yaml --kubeconfig $PKI/node$n.kubeconfig \\
  --hostname-override node$n --node-ip $HOST_IP --root-dir $dir/kubelet --cert-dir $dir/kubelet/pki \\
  --v=1 >$dir/log/kubelet.log 2>&1 &
echo \$! >$PIDS/kubelet-node$n
wait
RUN
  chmod +x "$dir/run.sh"
  start "node$n" "$dir/log/run.log" "${IN_NET[@]}" unshare --mount --propagation private "$dir/run.sh"
}

node_ready() { # N
  [[ $(kctl get node "node$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

node_down() { # N
  local n=$1 sock=$CLUSTER_DIR/node$1/containerd/containerd.sock t p h
  stop "kubelet-node$n"
  if running "containerd-node$n"; then
    # Kill and delete every task first, so that the shims exit with them.
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
    done
    sleep 1
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
    done
  fi
  stop "containerd-node$n"
  for p in /proc/[0-9]*; do # shims of this node's containerd that outlived it
    if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "-address $sock "; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  stop "node$n"
  for h in /sys/fs/cgroup/*/; do
    [[ -d $h/fleet-node$n ]] && find "$h/fleet-node$n" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# ---- what the host held before, so that down can give it back

remember_host() {
  [[ -f $CLUSTER_DIR/host.before ]] && return 0
  mkdir -p "$CLUSTER_DIR"
  {
    nft list tables 2>/dev/null | sed 's/^table //'
    [[ -d /var/log/containers ]] && echo "dir /var/log/containers"
  } >"$CLUSTER_DIR/host.before" || true
}

restore_host() {
  local ipt chain t fam name before=$CLUSTER_DIR/host.before
  # The cluster's chains and tables live in its network namespace, gone with it; these
  # lines remove what a cluster run in the host's own network (before it had a namespace)
  # left, and any table that came and holds no rule.
  for ipt in iptables ip6tables; do
    for chain in INPUT OUTPUT; do
      while $ipt -t filter -D "$chain" -j KUBE-FIREWALL 2>/dev/null; do :; done
    done
    $ipt -t filter -F KUBE-FIREWALL 2>/dev/null && $ipt -t filter -X KUBE-FIREWALL 2>/dev/null
    for t in mangle filter nat; do $ipt -t "$t" -X KUBE-KUBELET-CANARY 2>/dev/null || true; done
    $ipt -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
  done
  nft delete table ip kube-proxy 2>/dev/null || true
  nft delete table ip6 kube-proxy 2>/dev/null || true
  [[ -f $before ]] || return 0
  nft list tables 2>/dev/null | sed 's/^table //' | while read -r fam name; do
    grep -qx "$fam $name" "$before" && continue
    # Tables that came with the cluster and hold no rule any more.
    nft list table "$fam" "$name" 2>/dev/null | grep -vqE '^\s*(table|chain|type|\}|$)' ||
      nft delete table "$fam" "$name" 2>/dev/null || true
  done
  find /var/log/containers -maxdepth 1 -type l -lname "$CLUSTER_DIR/*" -delete 2>/dev/null || true
  grep -qx "dir /var/log/containers" "$before" || rmdir /var/log/containers 2>/dev/null || true
  rm -f -- "$before"
}

# ---- commands

cmd_up() {
  local nodes=${1:-2} n pause
  need_packages
  find_binaries
  pause=$(pause_image)
  make_pki
  remember_host
  net_up
  control_plane_up
  for ((n = 1; n <= nodes; n++)); do
    node_up "$n" "$pause"
  done
  for ((n = 1; n <= nodes; n++)); do
    wait_until 180 "node$n to be Ready" node_ready "$n"
  done
  log "cluster up: $nodes node(s); $(cmd_env)"
}

cmd_down() {
  local f
  shopt -s nullglob
  for f in "$PIDS"/node* "$PIDS"/kubelet-node* "$PIDS"/containerd-node*; do
    f=${f##*/}
    node_down "${f##*node}"
  done
  for f in kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop "$f"
  done
  net_down
  restore_host
  log "cluster down (state kept in $CLUSTER_DIR; reset forgets it)"
}

cmd_load() {
  local tar sock
  shopt -s nullglob
  for tar in "$@"; do
    for sock in "$CLUSTER_DIR"/node*/containerd/containerd.sock; do
      ctr --address "$sock" -n k8s.io images import "$tar" >&2 || die "importing $tar through $sock failed"
    done
  done
}

cmd_env() { echo "export KUBECONFIG=$(admin_kubeconfig)"; }

cmd_status() {
  local f
  shopt -s nullglob
  for f in "$PIDS"/*; do
    printf '%-26s %s\n' "${f##*/}" "$(running "${f##*/}" && echo "running (pid $(<"$f"))" || echo stopped)"
  done
  find_binaries
  kctl get nodes -o wide 2>/dev/null || true
}

case ${1:-} in
  up) cmd_up "${2:-${NODES:-2}}" ;;
  down) cmd_down ;;
  reset) cmd_down && rm -rf -- "$CLUSTER_DIR" ;;
  load) shift && cmd_load "$@" ;;
  env) cmd_env ;;
  status) cmd_status ;;
  *) sed -n '2,17p' "$0" >&2 && exit 2 ;;
esac
