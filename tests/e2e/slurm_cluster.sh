#!/usr/bin/env bash
# A real Slurm cluster of network namespaces, isolated from the host's network and from each other
# as real nodes are:
#   <prefix>-sw        a bridge (the switch)
#   <prefix>-c         the controller and login node "ctl": eth0 = 198.18.0.2/24, slurmctld and its munged
#   <prefix>-n<i>      node-<i>: eth0 = 198.18.0.(10+i)/24, slurmd and its munged
# Every machine has its own network, UTS (hostname) and mount namespace: a fresh /tmp (its Slurm
# spool, state and munge socket live in /tmp/dsd-slurm) and /dev/shm, and /etc/hosts naming every
# machine, as a cluster's DNS would. What a cluster shares is shared: the software (everything
# outside /tmp, and the folders under /tmp that KEEP names), slurm.conf and the munge key (in a work
# dir under /var/tmp, read-only to the daemons, as a configuration management tool would install
# them). Then runs "$@" on the controller (the login node) with SLURM_CONF and NODE_PID_<i> set, and stops every
# daemon by pid and removes the namespaces, whatever happens.
# Usage: [KEEP=DIR:DIR…] slurm_cluster.sh PREFIX NODES CPUS -- COMMAND…
set -euo pipefail
prefix=$1 nodes=$2 cpus=$3
shift 3
[[ ${1:-} == -- ]] && shift
for tool in slurmctld slurmd munged srun scontrol; do
  command -v "$tool" > /dev/null || { echo "slurm_cluster.sh: $tool is missing (scripts/setup.sh installs it)" >&2; exit 77; }
done
work=$(mktemp -d /var/tmp/dsd-slurm.XXXXXX)
chmod 755 "$work"
pids=()
source "$(dirname "$0")/netns_lib.sh"
trap netns_cleanup EXIT

netns_switch

# What the cluster shares: the munge key (0400, root's, as munged demands) and slurm.conf.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
{
  echo "127.0.0.1 localhost"
  echo "198.18.0.2 ctl"
  for ((i = 0; i < nodes; i++)); do echo "198.18.0.$((10 + i)) node-$i"; done
} > "$work/hosts"
chmod 644 "$work/hosts"
state=/tmp/dsd-slurm
cat > "$work/slurm.conf" << EOF
ClusterName=dsd
SlurmctldHost=ctl(198.18.0.2)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$state/munge.socket
CredType=cred/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/slurmd
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
# Nodes declare the CPUs the test asks for, whatever this machine has (one machine hosts them all).
SlurmdParameters=config_overrides
MpiDefault=none
# Every node has 4 GPUs as far as Slurm knows: what a job is granted (SLURM_GPUS_ON_NODE) is
# Slurm's real answer; nothing here uses a GPU.
GresTypes=gpu
# No slurmdbd: the completion log is what sacct -c reads. Memory is accounted every second and a
# step over its --mem is killed, as sites without cgroup memory limits configure it.
JobCompType=jobcomp/filetxt
JobCompLoc=$state/jobcomp.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
EOF
for ((i = 0; i < nodes; i++)); do
  echo "NodeName=node-$i NodeAddr=198.18.0.$((10 + i)) CPUs=$cpus RealMemory=4000 Gres=gpu:4 State=UNKNOWN" >> "$work/slurm.conf"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$work/slurm.conf"
# slurmd wants a cgroup file system; `ip netns exec` leaves none under /sys. Its controllers are
# mounted in the node's own /tmp (its private mount namespace), none under the host's /sys.
cat > "$work/cgroup.conf" << EOF
CgroupPlugin=cgroup/v1
CgroupAutomount=yes
CgroupMountpoint=$state/cgroup
EOF
# Slurm drops a GPU without a device file: each node has four stand-in files in its own /tmp.
echo "Name=gpu File=$state/gpu[0-3]" > "$work/gres.conf"
chmod 644 "$work/slurm.conf" "$work/cgroup.conf" "$work/gres.conf"

# One machine: its hostname, /etc/hosts, private /tmp (the KEEP folders bound in) and /dev/shm, then
# its munged and its daemon in the foreground; both end when the script is told to (TERM).
machine='set -e; hostname "$1"; mount --bind "$2/hosts" /etc/hosts
  mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  IFS=:; for keep in $4; do
    case "$keep" in /tmp/?*) mkdir -p "/dev/shm/${keep#/tmp/}"; mount --rbind "$keep" "/dev/shm/${keep#/tmp/}";; esac
  done; unset IFS
  mount --move /dev/shm /tmp; mount -t tmpfs -o mode=1777 tmpfs /dev/shm
  mkdir -p -m 755 '"$state"' '"$state"'/ctld '"$state"'/slurmd '"$state"'/cgroup
  touch '"$state"'/gpu0 '"$state"'/gpu1 '"$state"'/gpu2 '"$state"'/gpu3
  munged -F --force --key-file "$2/munge.key" --socket '"$state"'/munge.socket --pid-file '"$state"'/munged.pid \
    --seed-file '"$state"'/munged.seed --log-file '"$state"'/munged.log & m=$!
  for _ in $(seq 100); do [ -S '"$state"'/munge.socket ] && break; sleep 0.05; done
  shift 4; "$@" & d=$!
  trap "kill $d $m 2>/dev/null; wait" TERM INT
  wait $d || true; kill $m 2>/dev/null; wait'
netns_attach "$prefix-c" vc 198.18.0.2
ip netns exec "$prefix-c" unshare --mount --uts --propagation private -- bash -c "$machine" _ ctl "$work" "" "${KEEP:-}" \
  slurmctld -D -i -f "$work/slurm.conf" > "$work/ctld.out" 2>&1 &
pids+=($!)
for ((i = 0; i < nodes; i++)); do
  netns_attach "$prefix-n$i" "v$i" "198.18.0.$((10 + i))"
  ip netns exec "$prefix-n$i" unshare --mount --uts --propagation private -- bash -c "$machine" _ "node-$i" "$work" "" \
    "${KEEP:-}" slurmd -D -f "$work/slurm.conf" -N "node-$i" > "$work/slurmd$i.out" 2>&1 &
  pids+=($!)
done
export SLURM_CONF="$work/slurm.conf"
# For a command that changes a node's network (iptables): `nsenter --net=/proc/$NODE_PID_<i>/ns/net`
# (`ip netns exec` does not work from inside the login node's mount namespace).
for ((i = 0; i < nodes; i++)); do export "NODE_PID_$i=${pids[$((i + 1))]}"; done
# Every node idle before the command runs.
up=0
for _ in $(seq 200); do
  if ip netns exec "$prefix-c" nsenter --mount="/proc/${pids[0]}/ns/mnt" sinfo -h -o '%T %D' 2> /dev/null |
    awk -v n="$nodes" '$1 == "idle" && $2 == n {ok = 1} END {exit !ok}'; then
    up=1
    break
  fi
  sleep 0.1
done
if ((!up)); then
  echo "slurm_cluster.sh: the nodes did not come up" >&2
  cat "$work"/*.out >&2
  ip netns exec "$prefix-c" nsenter --mount="/proc/${pids[0]}/ns/mnt" sinfo -R >&2 || true
  ip netns exec "$prefix-c" nsenter --mount="/proc/${pids[0]}/ns/mnt" grep -i error /tmp/dsd-slurm/slurmctld.log | tail -5 >&2 || true
  exit 1
fi
set +e
ip netns exec "$prefix-c" nsenter --mount="/proc/${pids[0]}/ns/mnt" --uts="/proc/${pids[0]}/ns/uts" "$@"
rc=$?
exit $rc
