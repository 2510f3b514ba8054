# Shared by netns_cluster.sh and slurm_cluster.sh (sourced, never run): a switch of network
# namespaces and its cleanup. The caller sets `prefix` (every namespace is named "$prefix-…"),
# `pids` (the processes it started) and `work` (its temp dir), and calls `trap netns_cleanup EXIT`.

# The switch: namespace "$prefix-sw" holding bridge br0.
netns_switch() {
  ip netns add "$prefix-sw"
  ip -n "$prefix-sw" link set lo up
  ip -n "$prefix-sw" link add br0 type bridge
  ip -n "$prefix-sw" link set br0 up
}

# A machine on the switch: namespace $1, its switch-side veth $2, eth0 with address $3/24.
netns_attach() {
  ip netns add "$1"
  ip -n "$1" link set lo up
  ip -n "$prefix-sw" link add "$2" type veth peer name eth0 netns "$1"
  ip -n "$prefix-sw" link set "$2" master br0 up
  ip -n "$1" addr add "$3/24" dev eth0
  ip -n "$1" link set eth0 up
}

# Stops what we started by pid, then whatever those left in our namespaces (a job's slurmstepd
# outlives a killed slurmd, retrying it for ever: every process in one of them was started by us),
# removes the namespaces and the temp dir.
netns_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-" || true); do
    for p in $(ip netns pids "$ns" 2> /dev/null); do kill -9 "$p" 2> /dev/null || true; done
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix-" || true); do ip netns del "$ns"; done
  rm -rf "$work"
}
