#!/usr/bin/env bash
# A test cluster of network namespaces, isolated from the host's network:
#   <prefix>-sw        a bridge (the switch)
#   <prefix>-n<i>      node i: eth0 = 198.18.0.(10+i)/24, veth to the bridge, an agent on :47000
#   <prefix>-c         the coordinator: eth0 = 198.18.0.2/24
# Optional `tc` shaping of one node's link (both directions). Then runs "$@" inside the coordinator
# namespace with AGENTS (host:port,…) and TOKEN_FILE set, and cleans everything up (agents by pid,
# namespaces by name) whatever happens.
# With ISOLATED=1 the nodes share nothing with the coordinator but the network, as real nodes:
# each agent also has its own UTS namespace (hostname node-<i>) and mount namespace, where /tmp
# and /dev/shm are fresh tmpfs (so a run dir under /tmp is the node's own) and /etc/hosts names
# every node, as a cluster's DNS would. The software stays visible, as a cluster's shared software:
# everything outside /tmp, and the folders under /tmp that KEEP names (colon-separated: the build
# and source trees when a checkout lives under /tmp), bound into the node's fresh /tmp.
# Usage: [ISOLATED=1 [KEEP=DIR:DIR…]] netns_cluster.sh PREFIX NODES SLOW_NODE|-1 RATE -- COMMAND…
set -euo pipefail
prefix=$1 nodes=$2 slow=$3 rate=$4 isolated=${ISOLATED:-0}
shift 4
[[ ${1:-} == -- ]] && shift
dsd=${DSD:?DSD must name the dsdoctor binary}
work=$(mktemp -d)
pids=()
source "$(dirname "$0")/netns_lib.sh"
trap netns_cleanup EXIT

netns_switch
netns_attach "$prefix-c" vc 198.18.0.2
umask 077
"$dsd" agent --help >/dev/null
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
{
  echo "127.0.0.1 localhost"
  for ((i = 0; i < nodes; i++)); do echo "198.18.0.$((10 + i)) node-$i"; done
} > "$work/hosts"
chmod 644 "$work/hosts"
# An isolated node: its hostname, /etc/hosts, and private /tmp and /dev/shm. The fresh /tmp is made
# on /dev/shm first, the KEEP folders under /tmp are bound into it, and it is moved onto /tmp; then
# /dev/shm gets a fresh tmpfs of its own. The token is read before /tmp is covered.
isolated_agent='set -e; tok=$(cat "$4"); hostname "$1"; mount --bind "$5" /etc/hosts
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  IFS=:; for keep in $6; do
    case "$keep" in /tmp/?*) mkdir -p "/dev/shm/${keep#/tmp/}"; mount --rbind "$keep" "/dev/shm/${keep#/tmp/}";; esac
  done; unset IFS
  mount --move /dev/shm /tmp; mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  umask 077; printf %s "$tok" > /tmp/agent.token
  exec "$2" agent --listen "$3" --token-file /tmp/agent.token --name "$1"'
agents=()
for ((i = 0; i < nodes; i++)); do
  netns_attach "$prefix-n$i" "v$i" "198.18.0.$((10 + i))"
  if ((i == slow)); then
    ip netns exec "$prefix-n$i" tc qdisc add dev eth0 root tbf rate "$rate" burst 32kbit latency 400ms
    ip netns exec "$prefix-sw" tc qdisc add dev "v$i" root tbf rate "$rate" burst 32kbit latency 400ms
  fi
  if ((isolated)); then
    ip netns exec "$prefix-n$i" unshare --mount --uts --propagation private -- bash -c "$isolated_agent" _ \
      "node-$i" "$dsd" "198.18.0.$((10 + i)):47000" "$work/token" "$work/hosts" "${KEEP:-}" > "$work/agent$i.out" &
  else
    ip netns exec "$prefix-n$i" "$dsd" agent --listen "198.18.0.$((10 + i)):47000" --token-file "$work/token" \
      --name "node-$i" > "$work/agent$i.out" &
  fi
  pids+=($!)
  agents+=("198.18.0.$((10 + i)):47000")
done
for ((i = 0; i < nodes; i++)); do
  for _ in $(seq 200); do grep -q READY "$work/agent$i.out" && break; sleep 0.05; done
done
export AGENTS=$(IFS=,; echo "${agents[*]}") TOKEN_FILE="$work/token"
set +e
ip netns exec "$prefix-c" "$@"
rc=$?
exit $rc
