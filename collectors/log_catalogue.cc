#include "collectors/log_catalogue.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <cstdio>
#include <cstdlib>
#include <map>

namespace dsd::collectors {
namespace {

using diagnosis::Severity;
namespace codes = diagnosis::codes;
constexpr Severity kErr = Severity::kError;
constexpr Severity kWarn = Severity::kWarning;
constexpr Severity kInfo = Severity::kInfo;
constexpr LogRole kCause = LogRole::kCause;
constexpr LogRole kConseq = LogRole::kConsequence;
constexpr LogRole kExit = LogRole::kExit;
constexpr LogRole kContext = LogRole::kContext;

// Documentation the remedies rest on.
#define NCCL_ENV "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
#define NCCL_TROUBLE "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
#define TORCH_DIST "https://pytorch.org/docs/stable/distributed.html"
#define TORCH_FR "https://docs.pytorch.org/tutorials/prototype/flight_recorder_tutorial.html"
#define TORCH_ELASTIC "https://pytorch.org/docs/stable/elastic/errors.html"
#define TORCH_CUDA_SEM "https://pytorch.org/docs/stable/notes/cuda.html"
#define DS_LAUNCH "https://www.deepspeed.ai/getting-started/#resource-configuration-multi-node"
#define OMPI_TCP "https://docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html"
#define OMPI_FAQ "https://docs.open-mpi.org/en/main/launching-apps/troubleshooting.html"
#define IBV_WC "https://www.rdmamojo.com/2013/02/15/ibv_poll_cq/"
#define CUDA_ERR "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"

const char* kPeerDiedRemedy =
    "Usually a consequence: another rank died or stalled first and its peers saw the connection go. Find the first "
    "rank "
    "that failed (the finding naming it comes first); if none did, test the network between the nodes with `dsdoctor "
    "check`.";

// Order matters: the first match wins, so within a family the specific entries come first.
const std::vector<LogPattern> kCatalogue = {
    // ---- context (no finding): facts for attribution and cross-rank checks ------------------------
    // dsdoctor's own report and log lines (a job's output holds them when `dsdoctor run` is its
    // command): they restate findings already made, and are never the job's errors.
    {"dsdoctor_own_line",
     R"(^(?:\d{4}-\d\d-\d\dT[\d:.]+ )?(?:dsdoctor(?: [a-z]+)?: |(?:trace|debug|info|warning|error|critical) \[(?:run|check|agent|analyze|attach|tui|coordinator|launcher|diagnosis|net|runtime)\] ))",
     codes::kLogError, kInfo, kContext, "dsdoctor's own line", "", ""},
    {"nccl_comm_init",
     R"(NCCL INFO (?:\w+ )?comm 0x[0-9a-f]+ rank (?P<self_rank>\d+) nranks (?P<nranks>\d+)(?: cudaDev (?P<device>\d+))?)",
     codes::kLogError, kInfo, kContext, "NCCL communicator: rank {self_rank} of {nranks}", "", NCCL_ENV},
    {"nccl_version", R"(NCCL INFO NCCL version (?P<version>\d+\.\d+\.\d+))", codes::kLogError, kInfo, kContext,
     "NCCL {version}", "", ""},
    {"nccl_interface",
     R"(NCCL INFO (?:Bootstrap|NET/Socket|NET/IB) ?: ?Using .*?(?P<iface>[A-Za-z][\w.-]*):(?P<addr>\d+\.\d+\.\d+\.\d+|[0-9a-fA-F]*:[0-9a-fA-F:]+(?:%[\w.-]+)?)<\d+>)",
     codes::kLogError, kInfo, kContext, "NCCL uses {iface} ({addr})", "", NCCL_ENV},
    {"nccl_version_banner", R"(^NCCL version (?P<version>\d+\.\d+\.\d+))", codes::kLogError, kInfo, kContext,
     "NCCL {version}", "", ""},

    // ---- wrappers: the message they carry decides the cause and the remedy (Classify() looks inside)
    {"torch_async_exception",
     R"(Collective \w+\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:[^()]|\([^()]*\))*\) raised the following async exception: (?P<inner>.+))",
     codes::kNcclError, kErr, kCause, "PyTorch: {op} SeqNum={seq} failed: {inner}",
     "NCCL failed inside the collective: the reason (and the NCCL WARN lines before it) name the cause.", TORCH_DIST},
    {"torch_watchdog_terminated",
     R"((?:\[Rank (?P<self_rank>\d+)\] )?NCCL watchdog thread terminated with exception: (?P<inner>.+))",
     codes::kNcclError, kErr, kCause, "PyTorch's NCCL watchdog ended the process: {inner}",
     "The watchdog saw a CUDA error or a timeout on this rank's NCCL stream and took the process down; the inner "
     "message "
     "is the cause.",
     TORCH_DIST},
    // ---- NCCL: bootstrap and sockets --------------------------------------------------------------
    {"nccl_no_socket_interface",
     R"((?:Bootstrap ?: ?no socket interface found|(?:NET/Socket|Net) ?: ?[Nn]o (?:usable listening )?interface found(?: in the same subnet as remote address (?P<remote>\S+))?))",
     codes::kNcclError, kErr, kCause, "NCCL found no usable network interface",
     "NCCL_SOCKET_IFNAME (or NCCL_SOCKET_FAMILY) matches no interface that is up on this node: list the node's "
     "interfaces (`ip -br addr`) and set NCCL_SOCKET_IFNAME to one that exists on every node (a prefix such as `eth` "
     "or `=eth0` for an exact name; `^docker,lo` to exclude).",
     NCCL_ENV},
    {"nccl_bootstrap_rank_mismatch",
     R"(Bootstrap Root : mismatch in rank count from procs (?P<got>\d+) : (?P<nranks>\d+))", codes::kNcclError, kErr,
     kCause, "NCCL bootstrap: ranks disagree on the world size ({got} vs {nranks})",
     "Two jobs share one MASTER_ADDR:MASTER_PORT / NCCL unique id, or ranks were started with different world sizes: "
     "give "
     "each job its own port and take WORLD_SIZE from the launcher.",
     NCCL_TROUBLE},
    // Two processes claimed one rank: the bootstrap root counts check-ins by rank.
    {"nccl_bootstrap_duplicate_rank",
     R"(Bootstrap Root : rank (?P<dup>\d+) of (?P<nranks>\d+) ranks has already checked in)", codes::kNcclError, kErr,
     kCause, "NCCL bootstrap: two processes claimed rank {dup} (of {nranks})",
     "Two processes were given the same rank: the launcher and the program disagree on who sets RANK/LOCAL_RANK (srun "
     "starting one task per GPU under torchrun, or Lightning/Accelerate reading SLURM_PROCID while torchrun also sets "
     "RANK), more tasks than the program expects (--ntasks-per-node against devices), or a restarted process joining "
     "the old communicator. Print RANK, LOCAL_RANK and WORLD_SIZE in every process: each rank must appear once.",
     NCCL_TROUBLE},
    // NCCL told to use loopback only: fine on one node, never across nodes.
    {"nccl_ifname_loopback", R"(NCCL_SOCKET_IFNAME set (?:by environment )?to lo(?:\s|$))", codes::kSocketIfnameInvalid, kWarn,
     kCause, "NCCL_SOCKET_IFNAME=lo: NCCL talks over loopback only (fine on one node, never across nodes)",
     "Loopback reaches no other node: a job on more than one node hangs or fails to connect. Set NCCL_SOCKET_IFNAME "
     "to the interface of the network between the nodes (`ip -br addr`; `^lo,docker` excludes), on every node.",
     NCCL_ENV},
    // A rank advertised a loopback address: NCCL picked lo (NCCL_SOCKET_IFNAME=lo, or a host name that
    // resolves to 127.0.1.1), so its peers dial themselves.
    {"nccl_connect_loopback",
     R"((?:(?:socketStartConnect|socketPollConnect|socketConnect|bootstrap)[^:]*: |NCCL WARN )Connect to (?P<peer>127\.\d+\.\d+\.\d+|::1)<\d+> failed)",
     codes::kNcclError, kErr, kCause, "NCCL could not connect to a loopback address ({peer})",
     "On one node, NCCL over lo is fine and a failed connection means the local peer rank died or never started "
     "(its own first error says why). In a job over several nodes, a rank advertised its loopback interface "
     "(NCCL_SOCKET_IFNAME=lo, or the node's host name resolving to 127.0.1.1 in /etc/hosts), which peers on other "
     "nodes cannot reach: set NCCL_SOCKET_IFNAME to the cluster network's interface on every node (`ip -br addr`; "
     "`dsdoctor check` shows what NCCL picks under the job's env), or fix the host's /etc/hosts entry.",
     NCCL_ENV},
    {"nccl_socket_no_address", R"(connecting to address +with family (?P<family>\d+) is neither AF_INET)",
     codes::kSocketIfnameInvalid, kErr, kCause,
     "NCCL has no address to connect to: the interface it was told to use has none here",
     "NCCL_SOCKET_IFNAME names an interface that does not exist on this node or has no IP address (the address is "
     "empty, its family garbage): list the interfaces with `ip -br addr` and set NCCL_SOCKET_IFNAME to one that exists "
     "on every node; `dsdoctor check` verifies it under the job's env.",
     NCCL_ENV},
    // A link-local address (fe80::/10, 169.254/16) reaches only its own link: NCCL picked an interface
    // whose only address is link-local (an IPv6-only bridge, a USB or BMC NIC) and advertised it.
    {"nccl_connect_link_local",
     R"((?:(?:socketStartConnect|socketPollConnect|socketConnect|bootstrap)[^:]*: |NCCL WARN )Connect to (?P<peer>(?:fe80:[0-9a-fA-F:]*(?:%[\w.-]+)?|169\.254\.\d+\.\d+)<\d+>) failed)",
     codes::kNcclError, kErr, kCause, "NCCL dialed a link-local address ({peer})",
     "A rank advertised a link-local address, which other nodes cannot reach (and which only works on the interface "
     "after the %): NCCL picked an interface with no routable address. Set NCCL_SOCKET_IFNAME to the interface of "
     "the network between the nodes (`ip -br addr`; the same name on every node), or NCCL_SOCKET_FAMILY=AF_INET to "
     "keep NCCL on IPv4; `dsdoctor check` shows what NCCL picks under the job's env.",
     NCCL_ENV},
    {"nccl_connect_failed",
     R"((?:(?:socketStartConnect|socketPollConnect|socketConnect|bootstrap)[^:]*: |NCCL WARN )Connect to (?P<peer>\S+) (?:failed ?: ?(?P<error>.+)|returned (?P<errno>\d+)\((?P<reason>[^)\n]*)\)))",
     codes::kNcclError, kErr, kCause, "NCCL could not connect to {peer}: {error}{reason}",
     "A firewall between the nodes (NCCL uses random high ports unless NCCL_PORT_RANGE is set; open them or set a "
     "range "
     "the firewall allows), or NCCL_SOCKET_IFNAME picks an interface the peer cannot reach (a docker/NAT address): "
     "`dsdoctor check` tells DROP, REJECT and no route apart. 'No route to host' (113) and 'Network is unreachable' "
     "(101): this node has no route to that address (an interface the peer is not on, or a firewall answering "
     "host-unreachable); 'Connection refused' (111): nothing listened there (the peer died, or a REJECT rule); timed "
     "out (110): packets dropped (a DROP rule).",
     NCCL_TROUBLE " " NCCL_ENV},
    {"nccl_connect_exhausted",
     R"((?P<function>\w+): connect (?:to (?P<peer>\S+) )?returned (?P<error>.+?), exceeded error retry count)",
     codes::kNcclError, kErr, kCause, "NCCL gave up connecting to {peer}: {error}",
     "NCCL retried the connection until NCCL_SOCKET_RETRY_CNT ran out: 'Connection refused' means nothing listened "
     "(the peer "
     "rank died or had not started: look for its first error), 'timed out' that SYNs were dropped (a firewall, or "
     "NCCL_SOCKET_IFNAME picking a link-local/NAT address). `dsdoctor check` tells them apart.",
     NCCL_TROUBLE " " NCCL_ENV},
    {"nccl_connect_retry",
     R"((?:Call to connect returned (?P<error>[^,]+), retrying|connect (?:to \S+ )?returned (?P<error2>.+?), retrying))",
     codes::kNcclError, kWarn, kCause, "NCCL retries a connection: {error}{error2}",
     "The peer's NCCL port is not accepting yet or is filtered: if it repeats until a timeout, a firewall or the wrong "
     "NCCL_SOCKET_IFNAME is the cause (`dsdoctor check`).",
     NCCL_TROUBLE},
    {"nccl_socket_closed",
     R"((?:Connection closed by remote peer(?: (?P<peer>\S+))?|(?:Net :|\w*[sS]ocketProgress\w*:) Call to (?:recv from|send to) (?P<peer2>\S+) failed|NET/Socket : peer \S+ shutdown|communicator encountered a fatal error))",
     codes::kNcclError, kErr, kConseq, "NCCL: a peer closed its connection: {peer}{peer2}", kPeerDiedRemedy,
     NCCL_TROUBLE},
    {"nccl_proxy_failed", R"(Proxy Call to rank (?P<peer>\d+) failed)", codes::kNcclError, kErr, kConseq,
     "NCCL proxy call to rank {peer} failed",
     "Rank {peer}'s NCCL proxy did not answer: that rank died or hung first (look for its own error), or the "
     "connection to "
     "it was cut.",
     NCCL_TROUBLE},

    // ---- NCCL: InfiniBand / RoCE -------------------------------------------------------------------
    {"nccl_ib_retry_exceeded",
     R"(NET/IB\w*(?:/GIN)? ?: ?Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?:IBV_WC_\w+\()?12\b)",
     codes::kNcclError, kErr, kCause,
     "InfiniBand transport retry counter exceeded talking to {peer} (IBV_WC_RETRY_EXC_ERR, status 12)",
     "Packets to the peer were lost until the QP gave up: a bad cable/port or switch, the peer's HCA down, or RoCE "
     "without lossless configuration (PFC/ECN). Check `ibstat`/`ibv_devinfo` on both nodes and the switch counters; "
     "NCCL_IB_TIMEOUT (default 18 for 2.14+) and NCCL_IB_RETRY_CNT raise the tolerance, not the cause.",
     NCCL_ENV " " IBV_WC},
    {"nccl_ib_flush",
     R"(NET/IB\w*(?:/GIN)? ?: ?Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?:IBV_WC_\w+\()?5\b)",
     codes::kNcclError, kErr, kConseq,
     "InfiniBand work request flushed talking to {peer} (IBV_WC_WR_FLUSH_ERR, status 5)",
     "A flush follows an earlier error on the same queue pair (the QP went to the error state): the first completion "
     "error or the first rank that failed is the cause.",
     IBV_WC},
    {"nccl_ib_local_protection",
     R"(NET/IB\w*(?:/GIN)? ?: ?Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?:IBV_WC_\w+\()?4\b)",
     codes::kNcclError, kErr, kCause,
     "InfiniBand local protection error talking to {peer} (IBV_WC_LOC_PROT_ERR, status 4)",
     "A buffer NCCL posted was not registered for the access it needed: usually GPUDirect RDMA trouble (nvidia-peermem "
     "not loaded, or an ACS/IOMMU setting that blocks peer-to-peer); try NCCL_NET_GDR_LEVEL=LOC to confirm.",
     NCCL_ENV " " IBV_WC},
    {"nccl_ib_completion_error",
     R"(NET/IB\w*(?:/GIN)? ?: ?Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?:IBV_WC_\w+\()?(?P<status>\d+))",
     codes::kNcclError, kErr, kCause, "InfiniBand completion error {status} talking to {peer}",
     "The HCA reported a failed work request (ibv_wc_status {status}): check the link (`ibstat`, `ibv_devinfo`), the "
     "peer node, and the fabric's error counters.",
     IBV_WC},
    // libmlx5 (the Mellanox/NVIDIA NIC's user-space driver) reports a failed work request itself,
    // before NCCL's own line (or instead of it, under Ray or in a trimmed paste).
    {"mlx5_completion_error", R"(mlx5: (?P<where>[\w.:-]+): got completion with error)", codes::kNcclError, kErr, kCause,
     "RDMA: the mlx5 NIC reported a failed work request (on {where})",
     "The InfiniBand/RoCE transfer failed at the NIC: a link or switch port going down, the peer's process or NIC "
     "going away, or a RoCE setting the fabric does not carry (GID index, PFC/ECN). Check `ibstat`/`ibv_devinfo` on "
     "this node and its peers, the switch's port counters, and the NCCL WARN lines (NET/IB, with the status) beside "
     "it.",
     IBV_WC},
    {"nccl_ib_async_event",
     R"(NET/IB ?: (?:\S+:\d+ )?(?:Got (?:non-fatal )?async event ?: ?|async fatal event(?: on \w+ \([^)]*\))?: )(?P<event>.+))",
     codes::kNcclError, kErr, kCause, "InfiniBand async event: {event}",
     "The HCA reported a port or device event (port error / link down): check the cable, the switch port and `ibstat` "
     "on "
     "this node; other ranks' errors after this one are consequences.",
     NCCL_TROUBLE},
    {"nccl_ib_reg_mr", R"((?:ibv_reg_mr|ibv_reg_dmabuf_mr)(?:_iova2)? failed(?: with error (?P<error>.+))?)",
     codes::kNcclError, kErr, kCause, "NCCL could not register memory with the InfiniBand HCA (ibv_reg_mr)",
     "Locked-memory limit too low: set `ulimit -l unlimited` (containers: --ulimit memlock=-1, Slurm: "
     "PropagateResourceLimits) "
     "on every node; for GPU buffers, load nvidia-peermem.",
     NCCL_TROUBLE},
    {"nccl_ib_modify_qp", R"(ibv_modify_qp failed(?: with (?:error )?(?P<error>.+))?)", codes::kNcclError, kErr, kCause,
     "NCCL could not bring an InfiniBand/RoCE queue pair up (ibv_modify_qp: {error})",
     "On RoCE usually the GID index: pick the RoCE v2 GID with `show_gids` and set NCCL_IB_GID_INDEX (often 3), and "
     "the "
     "same on every node; on IB check NCCL_IB_HCA names active ports.",
     NCCL_ENV},
    // NCCL's ibverbs wrapper: "misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot
    // allocate memory" (the calls with entries of their own are matched above).
    {"nccl_ibv_call_failed", R"(Call to (?P<call>ibv_\w+) failed(?: with error (?P<error>.+))?)", codes::kNcclError,
     kErr, kCause, "NCCL: the InfiniBand/RoCE call {call} failed: {error}",
     "An ibverbs call failed inside NCCL. 'Cannot allocate memory' (ENOMEM) is the locked-memory limit: `ulimit -l` "
     "must be unlimited on every node (containers: --ulimit memlock=-1; Slurm: PropagateResourceLimits or the "
     "slurmd's own limit), or the HCA ran out of queues (other jobs on it; fewer NCCL_IB_QPS_PER_CONNECTION). Other "
     "errors: check the device and port with `ibv_devinfo` and the names NCCL_IB_HCA gives.",
     NCCL_TROUBLE},
    {"nccl_ib_no_device", R"(NET/IB ?: ?No device found)", codes::kNcclError, kInfo, kContext,
     "NCCL found no InfiniBand device", "", NCCL_ENV},

    // ---- NCCL: shared memory, topology, usage ------------------------------------------------------
    {"nccl_shm",
     R"((?:Error while creating shared memory segment (?P<path>\S+)|Error: failed to extend (?P<path2>\S+) to \d+ bytes|unable to allocate shared memory|NCCL WARN .*(?:shm_open|ncclShmOpen)))",
     codes::kNcclError, kErr, kCause, "NCCL could not create a shared-memory segment",
     "/dev/shm is too small (containers default to 64 MiB): run the container with --shm-size=1g or larger or "
     "--ipc=host "
     "(Kubernetes: an emptyDir with medium Memory at /dev/shm); NCCL_SHM_DISABLE=1 works around it at a cost.",
     NCCL_TROUBLE},
    {"nccl_shm_attach", R"(Error while attaching to shared memory segment (?P<path>\S+))", codes::kNcclError, kErr,
     kCause, "NCCL could not attach to a peer's shared-memory segment {path}",
     "The ranks of one node do not share /dev/shm: they run in different containers/pods without a shared IPC "
     "namespace "
     "(use --ipc=host or one pod), systemd removed the segment (RemoveIPC=no in logind.conf), or the ranks load "
     "different "
     "NCCL versions. NCCL_SHM_DISABLE=1 works around it.",
     NCCL_TROUBLE},
    {"nccl_topology",
     R"((?:Topology detection failed|Could not find real path of (?P<path>/sys\S*)|Attribute \w+ of node \w+ not found|Could not find GPU in topology|Failed to find reverse path from remNode|Set CPU affinity : unable to find|(?:NCCL WARN|Last error:).*(?:ncclTopoGetSystem|NCCL_TOPO_FILE|NCCL_GRAPH_FILE)))",
     codes::kNcclError, kErr, kCause, "NCCL topology detection failed",
     "NCCL could not read or trust the PCI/NVLink topology: in containers mount the host's /sys read-only; on VMs set "
     "NCCL_TOPO_FILE to the XML for this machine type; remove a stray NCCL_GRAPH_FILE or NCCL_TOPO_FILE (also in "
     "/etc/nccl.conf and ~/.nccl.conf) that describes another machine.",
     NCCL_ENV},
    {"nccl_duplicate_gpu",
     R"(Duplicate GPU detected ?: ?rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<device>\w+))",
     codes::kNcclError, kErr, kCause, "ranks {a} and {b} use the same GPU ({device})",
     "Each rank must select its own GPU: call torch.cuda.set_device(local_rank) (LOCAL_RANK) before init_process_group "
     "or "
     "the first CUDA call, and check CUDA_VISIBLE_DEVICES and the number of slots per node.",
     NCCL_TROUBLE},
    {"nccl_invalid_usage", R"((?:ncclInvalidUsage|invalid usage(?: \(run with NCCL_DEBUG=WARN for details\))?))",
     codes::kNcclError, kErr, kCause, "NCCL reports invalid usage",
     "NCCL was called wrongly: two ranks on one GPU, a wrong world size or rank, mismatched collectives or a "
     "communicator used "
     "after abort. NCCL_DEBUG=WARN prints which argument.",
     NCCL_TROUBLE},
    {"nccl_remote_error", R"((?:ncclRemoteError|remote process exited or there was a network error))",
     codes::kNcclError, kErr, kConseq, "NCCL: a remote process exited or the network failed", kPeerDiedRemedy,
     NCCL_TROUBLE},
    {"nccl_comm_aborted", R"(NCCL communicator was aborted(?: on rank (?P<self_rank>\d+))?)", codes::kNcclError, kErr,
     kConseq, "the NCCL communicator was aborted (after another failure)", kPeerDiedRemedy, TORCH_DIST},
    {"nccl_nvls_failure", R"(nvls\.cc:\d+ NCCL WARN Cuda failure)", codes::kNcclError, kErr, kCause,
     "NCCL NVLink SHARP (NVLS) setup failed",
     "Multicast objects on the NVSwitch could not be created: a driver older than the NCCL build expects, or "
     "nvidia-fabricmanager/IMEX not running. Upgrade the driver or check the fabric manager; NCCL_NVLS_ENABLE=0 skips "
     "NVLS.",
     NCCL_ENV},
    {"nccl_library_mismatch", R"(Invalid config (?P<attribute>[\w/ ]+?) attribute value (?P<value>-?\d+))",
     codes::kNcclVersionMismatch, kErr, kCause, "the NCCL library loaded is older than the one PyTorch was built with",
     "Two NCCL copies are installed and the older one is loaded (LD_LIBRARY_PATH, a system libnccl, or a second "
     "nvidia-nccl "
     "wheel): make the loaded library match torch.cuda.nccl.version() (`pip list | grep nccl`, `ldd`), or unset "
     "LD_LIBRARY_PATH/LD_PRELOAD entries that point to another NCCL.",
     NCCL_TROUBLE},
    {"nccl_ib_size_mismatch",
     R"(NET/IB ?: req \d+/\d+ tag \w+ peer (?P<peer>\S+) collective mismatch error, local size (?P<local>\d+) remote size (?P<remote>\d+))",
     codes::kCollectiveMismatch, kErr, kCause,
     "NCCL over IB: sizes differ with {peer} (local {local}, remote {remote})",
     "The ranks issued different collectives (sizes or order), or run different NCCL versions or NCCL_* settings "
     "(buffer "
     "size, protocol): make every rank call the same collectives and use the same NCCL and environment everywhere.",
     NCCL_TROUBLE},
    {"nccl_no_net_plugin", R"(Failed to initialize any NET plugin)", codes::kNcclError, kErr, kCause,
     "NCCL could not initialise any network plugin",
     "No network transport works on this node: on EFA/TCPX clusters install the vendor's NCCL net plugin and set "
     "NCCL_NET_PLUGIN; elsewhere check that NCCL_NET / NCCL_IB_DISABLE do not exclude every transport.",
     NCCL_ENV},
    {"nccl_no_ibverbs", R"(Failed to open libibverbs)", codes::kNcclError, kInfo, kContext, "NCCL found no libibverbs",
     "", NCCL_ENV},
    {"nccl_cuda_failure", R"((?:Cuda failure (?:\d+ )?'(?P<error>[^']+)'|ncclUnhandledCudaError|unhandled cuda error))",
     codes::kNcclError, kErr, kCause, "CUDA call inside NCCL failed",
     "A CUDA call inside NCCL failed ('out of memory': free GPU memory or lower NCCL buffers; 'peer access': check "
     "NVLink/P2P with `nvidia-smi topo -m`, NCCL_P2P_DISABLE=1 to confirm); the CUDA error named is the cause.",
     NCCL_TROUBLE},
    {"nccl_system_error", R"((?:ncclSystemError|unhandled system error))", codes::kNcclError, kErr, kCause,
     "NCCL: unhandled system error",
     "A system call inside NCCL failed: the NCCL WARN lines just before say which (socket connect: firewall or "
     "NCCL_SOCKET_IFNAME; shm: /dev/shm too small, --shm-size/--ipc=host; ulimits). Rerun with NCCL_DEBUG=WARN or INFO "
     "if "
     "there are none.",
     NCCL_TROUBLE},
    {"nccl_internal_error", R"((?:ncclInternalError|NCCL error[^,]*, internal error))", codes::kNcclError, kErr, kCause,
     "NCCL: internal error",
     "Usually a mismatch NCCL cannot check: different NCCL versions across nodes, or ranks whose collective calls "
     "differ. "
     "Compare the `NCCL version` lines of every rank (`dsdoctor check` does) before reporting a bug.",
     NCCL_TROUBLE},
    // A stack (py-spy dump --native, gdb, eu-stack) pasted into the log, inside NCCL's communicator
    // setup: a rank hung there waits for peers NCCL's bootstrap cannot reach. A frame is followed by
    // "(" (its library or arguments); NCCL's "Init timings - ncclCommInitRankConfig: …" line is not one.
    {"stack_in_nccl_init",
     R"((?:^|[\s#]|\bin )(?P<frame>c10d::ProcessGroupNCCL::getNCCLComm|ncclCommInitRank\w*|initTransportsRank|bootstrapInit\w*|ncclCommSplit) ?\()",
     codes::kNcclError, kWarn, kCause, "a stack is inside NCCL's communicator setup",
     "If the process is hung there, NCCL cannot finish setting up its communicator: a peer rank never reached the same "
     "first collective (its own stack says where it is), or NCCL's bootstrap cannot connect between the nodes (a "
     "firewall, or NCCL_SOCKET_IFNAME picking an interface the peers cannot reach). Run `dsdoctor check` on the nodes "
     "and rerun with NCCL_DEBUG=INFO to see which connection it waits for.",
     NCCL_TROUBLE},
    // With NCCL_DEBUG=INFO every level an error passes through prints "file.cc:LINE -> N" (N an
    // ncclResult_t): the first names where it began.
    {"nccl_error_chain", R"((?P<where>\w+\.cc):\d+ -> (?P<result>[1-7])\b)", codes::kNcclError, kWarn, kCause,
     "NCCL: a call failed inside NCCL and its error went up the call chain",
     "Each `file:line -> N` line is one level of NCCL passing error N up: 2 a system error (a socket or the network), "
     "3 internal, 4 an invalid argument, 5 invalid usage, 6 a remote error (a peer failed). The first such line says "
     "where it began: misc/socket.cc or bootstrap.cc mean NCCL could not connect (a firewall, or NCCL_SOCKET_IFNAME "
     "picking an interface the peers cannot reach: `dsdoctor check`), transport/net_ib.cc the InfiniBand network. "
     "The NCCL WARN lines just before it say more.",
     NCCL_TROUBLE},
    // aws-ofi-nccl (NCCL's libfabric plugin: AWS EFA and other fabrics): a transfer the provider failed.
    {"nccl_ofi_request_error", R"(NET/OFI (?P<message>Request \S+ completed with error[^{\n]*))", codes::kNcclError,
     kErr, kCause, "NCCL's OFI plugin: a transfer failed on the fabric ({message})",
     "The libfabric provider under aws-ofi-nccl failed a send or receive (RC is libfabric's error number). On AWS "
     "EFA: a security group that does not allow all traffic to and from itself, EFA not enabled on an instance, or "
     "plugin, libfabric and NCCL versions that do not match (`fi_info -p efa` on every node); 'UNDELIVERABLE' means "
     "the peer's endpoint is gone (the peer process died first: look for its own error) or unreachable.",
     "https://github.com/aws/aws-ofi-nccl"},
    // NCCL before 2.4 printed "include/socket.h:344 WARN …" without its name.
    {"nccl_warn",
     R"((?:NCCL WARN|(?:^|[ \t])(?:include|misc|transport|graph|bootstrap|proxy|init|enqueue|group|net|collectives)[\w/]*\.(?:h|cc?):\d+ WARN) (?P<message>.+))",
     codes::kNcclError, kErr, kCause, "NCCL WARN {message}",
     "NCCL reported an error it has no code for: the message names the call and peer; rerun with NCCL_DEBUG=INFO for "
     "the "
     "lines before it, and run `dsdoctor check` for interfaces, ports and versions.",
     NCCL_TROUBLE},

    // ---- PyTorch process groups: watchdog, NCCL errors -------------------------------------------------
    {"runtime_watchdog",
     R"(watchdog: rank (?P<self_rank>\d+): (?P<call>.+) in flight for (?P<seconds>[0-9.]+) s(?P<rest>.*))",
     codes::kWatchdogTimeout, kWarn, kCause, "watchdog: rank {self_rank}: {call} in flight for {seconds} s{rest}",
     "A call stayed in flight past DSDOCTOR_TIMEOUT; the other findings say why it could not finish.", ""},
    {"torch_watchdog",
     R"((?:PG ID (?P<pg>\d+)[^\]]*?)?(?:Rank (?P<self_rank>\d+)\] )?Watchdog caught collective operation timeout: Work\w*\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)(?:.*Timeout\(ms\)=(?P<timeout_ms>\d+))?)",
     codes::kWatchdogTimeout, kErr, kCause, "PyTorch watchdog: {op} SeqNum={seq} timed out",
     "The collective ran past the process group's timeout on this rank: compare which ranks report the same SeqNum. A "
     "rank "
     "that never reports it never got there (its stack or last log line says where it is); if every rank reports it, "
     "the "
     "network stalled. init_process_group(timeout=...) only hides slow steps such as checkpoints.",
     TORCH_DIST},
    // The same line cut after its head (a paste word-wrapped by a browser or an editor): the collective and
    // its SeqNum went to the next line.
    {"torch_watchdog_cut", R"((?:Rank (?P<self_rank>\d+)\] )?Watchdog caught collective operation timeout:\s*$)",
     codes::kWatchdogTimeout, kErr, kCause,
     "PyTorch watchdog: a collective timed out (the line is cut: its op and SeqNum follow on the next line)",
     "The collective ran past the process group's timeout on this rank: compare which ranks report the same SeqNum. A "
     "rank that never reports it never got there (its stack or last log line says where it is); if every rank "
     "reports it, the network stalled. init_process_group(timeout=...) only hides slow steps such as checkpoints.",
     TORCH_DIST},
    {"torch_blocking_wait_timeout",
     R"(Work \w+\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:[^()]|\([^()]*\))*\) timed out in blocking wait)",
     codes::kWatchdogTimeout, kErr, kCause, "PyTorch: {op} SeqNum={seq} timed out (blocking wait)",
     "The collective ran past the process group's timeout: compare which ranks report the same SeqNum; a rank that "
     "never "
     "reports it never got there.",
     TORCH_DIST},
    {"torch_watchdog_stuck",
     R"((?:ProcessGroupNCCL's watchdog got stuck for (?P<seconds>\d+) seconds|Heartbeat monitor timed out|watchdog thread got stuck))",
     codes::kWatchdogTimeout, kErr, kCause, "PyTorch's NCCL watchdog thread itself got stuck",
     "A CUDA or NCCL call blocked the watchdog (a hung kernel, a GPU fault or a driver problem): check `nvidia-smi` "
     "and the "
     "kernel log (Xid) on that node; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC sets how long it waits.",
     TORCH_DIST},
    // torch 2.0-2.2 prints this just before the takedown line: the same reaction, not a cause.
    {"torch_nccl_ops_failed", R"(Some NCCL operations have failed or timed out\. Due to the asynchronous nature)",
     codes::kWatchdogTimeout, kErr, kConseq, "PyTorch: this rank's NCCL operations failed or timed out",
     "This is PyTorch reacting to the timeout or NCCL error logged just before on the same rank (the watchdog's "
     "line names the collective and its SeqNum): that one is the finding.",
     TORCH_DIST},
    {"torch_watchdog_takedown", R"(To avoid data inconsistency, we are taking the entire process down)",
     codes::kWatchdogTimeout, kErr, kConseq, "PyTorch took the process down after a failed or timed-out collective",
     "This is PyTorch reacting to the timeout or NCCL error logged just before on the same rank.", TORCH_DIST},
    // torch >= 2.3's heartbeat monitor: "Terminating the process after attempting to dump debug info, due to
    // ProcessGroupNCCL watchdog hang." (or "… due to collective timeout or exception.").
    {"torch_monitor_terminate",
     R"((?:Rank (?P<self_rank>\d+)\] )?Terminating the process after attempting to dump debug info(?:, due to (?P<why>.+))?)",
     codes::kWatchdogTimeout, kErr, kConseq, "PyTorch's heartbeat monitor ended the process: {why}",
     "PyTorch ended this rank after its NCCL watchdog timed out, saw a failed collective, or itself got stuck: the "
     "lines before it on this rank say which. With none, the watchdog was blocked by a hung CUDA or NCCL call: check "
     "`nvidia-smi` and the kernel log (Xid) on that node; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC sets how long the monitor "
     "waits, and the Flight Recorder dump it wrote (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) shows each rank's last "
     "collectives.",
     TORCH_FR},
    {"torch_wait_timeout", R"((?:^|: )(?:Operation timed out!|NCCL timeout in: (?P<where>\S+)))",
     codes::kWatchdogTimeout, kErr, kCause, "PyTorch: a collective's wait timed out",
     "The rank waited for a collective (work.wait() or the NCCL communicator) until the process group's timeout: "
     "another rank never made the matching call (compare where each rank was: `dsdoctor run` records it) or the "
     "network between them is blocked; raise init_process_group(timeout=...) only for legitimately slow steps.",
     TORCH_DIST},
    // Every rank of the group prints this once one rank's watchdog timed out ("from rank N", or "from
    // this local rank" on that rank); its counters say whether the rank had the collective in flight.
    {"torch_dump_signal",
     R"((?:PG ID (?P<pg>\d+)[^\]]*\]\s*)?Received a dump signal due to a collective timeout from\s+(?:this local rank|rank (?P<subject>\d+))(?:.*?Last enqueued \w+ work: (?P<enqueued>-?\d+), last completed \w+ work: (?P<completed>-?\d+))?)",
     codes::kWatchdogTimeout, kErr, kConseq,
     "a collective timed out and PyTorch's watchdog asked every rank to dump its state (last enqueued NCCL work "
     "{enqueued}, last completed {completed})",
     "A rank whose last enqueued work equals its last completed one had nothing in flight: it never issued the "
     "collective the others wait in (or is stuck inside the call before NCCL took it, such as a new communicator's "
     "setup); look at where it was instead (its stack: `py-spy dump`, or its last lines). The ranks with work in "
     "flight are waiting for it.",
     TORCH_DIST},
    // torch >= 2.3's watchdog says a work timed out in a line of its own (beside, or in a paste instead of,
    // "Watchdog caught collective operation timeout"): the rank waited in that collective past the timeout.
    {"torch_work_timed_out",
     R"((?:PG ID (?P<pg>\d+)[^\]\n]*?)?(?:Rank (?P<self_rank>\d+)\] )?Timeout at NCCL work: (?P<seq>\d+), last enqueued NCCL work: (?P<enqueued>-?\d+), last completed NCCL work: (?P<completed>-?\d+))",
     codes::kWatchdogTimeout, kErr, kCause,
     "PyTorch's watchdog: NCCL work {seq} timed out (last enqueued {enqueued}, last completed {completed})",
     "This rank had entered collective {seq} (its last enqueued work is at or past it) and waited in it past the "
     "process group's timeout: the rank is waiting, not the one missing. The ranks that never report work {seq} are "
     "the ones the others wait for (their last lines or stacks say where they are); if every rank reports it, the "
     "network stalled.",
     TORCH_DIST},
    {"torch_work_timeout",
     R"((?:PG ID (?P<pg>\d+)[^\]\n]*?)?(?:Rank (?P<self_rank>\d+)\] )?Exception \(either an error or timeout\) detected by watchdog at work: (?P<seq>\d+), last enqueued NCCL work: (?P<enqueued>-?\d+), last completed NCCL work: (?P<completed>-?\d+))",
     codes::kWatchdogTimeout, kWarn, kCause,
     "PyTorch's watchdog: NCCL work {seq} failed or timed out (last enqueued {enqueued}, last completed {completed})",
     "This rank had entered collective {seq} (its last enqueued work is at or past it) and it did not complete in "
     "time: the rank is waiting, not the one missing. The ranks that never report work {seq} are the ones the others "
     "wait for.",
     TORCH_DIST},
    {"torch_nccl_uniqueid_store",
     R"(\[(?P<self_rank>\d+)\] is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from \[(?P<subject>\d+)\] via c10d key-value store by key '(?P<key>[^']*)', but store->get\('[^']*'\) got error: (?P<error>[^.]+))",
     codes::kRendezvousError, kErr, kConseq,
     "could not get NCCL's unique id from rank {subject} through the store: {error}",
     "Rank {subject} holds the store and creates the NCCL id: it crashed or was not reachable (its own log says why), "
     "or it "
     "was still busy before this collective (then raise init_process_group(timeout=...) or move the slow work).",
     TORCH_DIST},
    // torchfrtrace (PyTorch's Flight Recorder analyzer) prints a block per collective not every rank
    // joined: a header, then "collective: nccl:all_reduce" and "missing ranks: {3, 4}" lines (older
    // releases print it all on one line). diagnosis/rules_logs.cc FlightRecorderAnalysis joins them.
    {"fr_not_all_ranks",
     R"(Not all ranks joining collective(?:[,:]? sequence number:? (?P<seq>\d+)| (?P<seq2>\d+) at entry \d+| for group (?P<pg>[^\s:]+)\S* collective (?P<op>\S+))?(?:.*?Missing ranks are \{(?P<missing>[\d, ]*)\})?)",
     codes::kRankMissing, kErr, kCause, "torchfrtrace: not every rank joined a collective (Flight Recorder analysis)",
     "The ranks the analysis names missing never issued this collective while the others waited in it: look at "
     "where they were instead (their stacks, `py-spy dump`, or their last log lines). A rank-dependent branch, work "
     "only some ranks do, or uneven data is the usual cause; raising the timeout does not help.",
     TORCH_FR},
    {"fr_missing_ranks", R"(^ *missing ranks: \{(?P<missing>\d[\d, ]*)\} *$)", codes::kRankMissing, kErr, kCause,
     "torchfrtrace: ranks {missing} never joined the collective (Flight Recorder analysis)",
     "Look at where those ranks were instead of in the collective (their stacks, `py-spy dump`, or their last log "
     "lines): a rank-dependent branch, work only some ranks do, or uneven data.",
     TORCH_FR},
    {"fr_collective", R"(^ *collective: (?P<op>[a-z]+:\w+) *$)", codes::kRankMissing, kInfo, kConseq,
     "torchfrtrace: the collective is {op}",
     "A line of torchfrtrace's block about a collective not every rank joined: the block's missing ranks are the "
     "finding.",
     TORCH_FR},
    {"torch_fingerprint_mismatch", R"(Detected mismatch between collectives on ranks)", codes::kCollectiveMismatch,
     kErr, kCause, "ranks issued different collectives (TORCH_DISTRIBUTED_DEBUG fingerprints)",
     "Every rank must call the same collectives with the same shapes and dtypes in the same order: the message names "
     "the "
     "two ranks and both calls; look for a rank-dependent branch or uneven data.",
     TORCH_DIST},
    {"torch_ddp_unused_params",
     R"((?:Expected to have finished reduction in the prior iteration|Parameter(?: indice)?s which did not receive grad for rank (?P<self_rank>\d+)))",
     codes::kLogError, kErr, kCause, "DDP: some parameters did not receive gradients",
     "Parts of the model were not used in the forward pass on some rank: pass find_unused_parameters=True to DDP, or "
     "make "
     "every rank use the same parameters (TORCH_DISTRIBUTED_DEBUG=DETAIL names them).",
     "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html"},
    {"torch_nccl_error", R"(NCCL error in: (?P<where>[^,]+), (?P<message>.+))", codes::kNcclError, kErr, kCause,
     "NCCL error: {message}",
     "NCCL failed: the NCCL WARN lines before this one (NCCL_DEBUG=WARN, the default under dsdoctor run) name the peer "
     "and "
     "the call.",
     NCCL_TROUBLE},

    // ---- PyTorch c10d store and rendezvous ---------------------------------------------------------
    {"torch_eaddrinuse",
     R"((?:(?:port: (?P<port>\d+)|bind to \S*?:(?P<port2>\d+)).*?)?(?:EADDRINUSE|[Aa]ddress already in use)|port: (?P<port3>\d+) already in use\s*$)",
     codes::kRendezvousError, kErr, kCause, "the rendezvous port is already in use",
     "Another process holds MASTER_PORT on the master node (a previous run still alive, or another job): pick a free "
     "--master_port / MASTER_PORT, or end the stale process (`ss -ltnp | grep PORT`).",
     TORCH_DIST},
    {"torch_store_retrying",
     R"(TCP client failed to connect/validate to host (?P<host>[^\s]+):(?P<port>\d+) - (?P<state>retrying|timed out))",
     codes::kRendezvousError, kWarn, kCause, "cannot reach the rendezvous store at {host}:{port} ({state})",
     "MASTER_ADDR/MASTER_PORT are wrong or unreachable from this node, or rank 0 has not started its store yet: check "
     "that {host} is the master node's address as seen from here and that port {port} is open.",
     TORCH_DIST},
    {"torch_store_connect_timeout",
     R"(The client socket has timed out after (?P<timeout>\d+(?:ms|s|min)) while trying to connect to \(?(?P<host>[^,()\s]+?)(?:, |:)(?P<port>\d+)\)?)",
     codes::kRendezvousError, kErr, kCause, "could not reach the rendezvous store at {host}:{port} within {timeout}",
     "MASTER_ADDR/MASTER_PORT are wrong or unreachable from this node: check that {host} is the master node's address "
     "as "
     "seen from here (not 127.0.0.1 or a NAT address), that rank 0 started and listens on {port}, and that no firewall "
     "drops the port (`dsdoctor check`).",
     TORCH_DIST},
    {"torch_store_connect_failed",
     R"(The client socket has failed to connect to (?:any network address of )?(?:\[(?P<host>[^\]]+)\]:(?P<port>\d+)|\((?P<host2>[^,()]+), (?P<port2>\d+)\)))",
     codes::kRendezvousError, kWarn, kCause,
     "could not connect to the rendezvous store at {host}{host2}:{port}{port2} (torch retries)",
     "A warning torch prints while it retries, common in healthy starts when rank 0 opens the store last; it matters "
     "only if the connection then times out. Then nothing listens on MASTER_ADDR:MASTER_PORT (rank 0 not started or "
     "already dead), the address is wrong, or a firewall rejects the port.",
     TORCH_DIST},
    {"torch_store_wait_clients",
     R"(Timed out after (?P<seconds>\d+) seconds waiting for (?:clients|workers)\. (?P<joined>\d+)/(?P<total>\d+) (?:clients|workers) joined)",
     codes::kRendezvousError, kErr, kCause,
     "the rendezvous store waited {seconds}s: only {joined} of {total} ranks joined",
     "Some ranks never connected to the master's store: they failed to start (their nodes' logs), point at another "
     "MASTER_ADDR/PORT, or the launch started fewer ranks than WORLD_SIZE.",
     TORCH_DIST},
    {"torch_store_get_timeout",
     R"((?:[Ww]ait timeout after (?P<ms>\d+)ms(?:, keys: (?P<keys>\S+))?|Socket Timeout|Timeout waiting for key|Stop_waiting response is expected))",
     codes::kRendezvousError, kErr, kCause, "timed out waiting on the c10d store",
     "This rank waited for a key another rank (usually rank 0) had not written: that rank was still busy before "
     "init_process_group or a new_group/barrier (preprocessing data, downloading, compiling) or had died. Do slow "
     "per-rank-0 work before every rank reaches the collective setup, or raise init_process_group(timeout=...).",
     TORCH_DIST},
    // torchrun's agents keep the rendezvous alive while the job runs: this one could not reach its store.
    {"torch_rendezvous_keepalive",
     R"(The node '(?P<node>[^'\n]+)' has failed to send a keep-alive heartbeat to the rendezvous '(?P<rdzv>[^'\n]*)' due to an error of type (?P<error>\w+))",
     codes::kRendezvousError, kErr, kCause,
     "torchrun on {node} lost the rendezvous store while the job ran (keep-alive heartbeat: {error})",
     "The store torchrun's agents share (the c10d store at --rdzv-endpoint, on the first node) stopped answering "
     "mid-run, and torchrun stopped its workers: the node or agent hosting it died or restarted (its own log says "
     "why), or the network dropped the idle connection (NAT, WSL2, a firewall's connection-tracking timeout). Look "
     "at the endpoint host first; behind NAT or on WSL2, use an address every node reaches directly.",
     TORCH_ELASTIC},
    {"torch_rendezvous_timeout",
     R"((?:RendezvousTimeoutError|RendezvousClosedError|RendezvousConnectionError|rendezvous .*timed out))",
     codes::kRendezvousError, kErr, kCause,
     "the elastic rendezvous failed (timed out, was closed, or its store could not be reached)",
     "Not all nodes joined the elastic rendezvous in time, or this node could not reach its store: check that every "
     "node runs torchrun with the same --rdzv_id, --rdzv_endpoint (host:port) and --nnodes, that the endpoint's host "
     "runs its agent first, and that its port is open from every node (`dsdoctor check` tests the ports).",
     TORCH_ELASTIC},
    {"torch_dist_store_error", R"(DistStoreError: (?P<message>.+))", codes::kRendezvousError, kErr, kCause,
     "c10d store error: {message}",
     "The rendezvous store failed: check MASTER_ADDR/MASTER_PORT and that rank 0 is alive and reachable.", TORCH_DIST},

    // ---- launchers: torchrun / elastic, DeepSpeed, pdsh/ssh, OpenMPI ----------------------------------
    // torchrun's agent restarting its workers (--max-restarts): a failure came first, and what follows
    // is another attempt (its errors may repeat the first's).
    {"torch_elastic_restart",
     R"(\[(?P<role>[\w-]+)\] Worker group FAILED\. (?P<left>\d+)/(?P<max>\d+) attempts left; will restart worker group)",
     codes::kLaunchError, kWarn, kConseq,
     "torchrun restarted its workers after a failure ({left} of {max} restarts left)",
     "A worker of this node failed, or another node's agent left the rendezvous, and torchrun started the workers "
     "again: the first error before this line is the cause, and the errors after it are the next attempt's (the same "
     "cause again, unless it was transient).",
     TORCH_ELASTIC},
    {"torch_elastic_death_signal", R"(Received (?P<signo>\d+) death signal, shutting down workers)",
     codes::kLaunchError, kErr, kConseq, "torchrun's agent received signal {signo} and stopped its workers",
     "Something outside the job signalled torchrun: the scheduler (a time limit or preemption: Slurm sends SIGTERM "
     "before SIGKILL), scancel or kill, or Kubernetes evicting the pod. `sacct -j JOBID` or `kubectl describe pod` "
     "says "
     "who; checkpoint regularly if the job can be preempted.",
     TORCH_ELASTIC},
    // Horovod stops every rank's pending operations once one rank raised or finished: this rank's
    // error is the echo of that one (TensorFlow prints it as AbortedError / "User function raise error").
    {"horovod_shut_down", R"(Horovod has been shut down)", codes::kCommError, kErr, kConseq,
     "Horovod shut down: another rank raised an exception or finished its loop before this one",
     "This rank's collective was cancelled because Horovod stopped; the cause is elsewhere. Look for the first "
     "exception in any rank's log (the earliest Traceback), or a rank that finished before the others: uneven data "
     "per rank, early stopping decided on one rank, a different number of steps. Every rank must make the same "
     "collective calls: compute steps per epoch identically (drop_last, the same dataset size), broadcast stop "
     "decisions, or call hvd.join() at the end.",
     "https://horovod.readthedocs.io/en/stable/troubleshooting_include.html"},
    // Horovod's stall check (HOROVOD_STALL_CHECK_TIME_SECONDS): the tensors some ranks submitted and
    // the ranks that never did ("missing ranks"), or the ranks that did ("ready ranks", older releases).
    {"horovod_stall",
     R"(One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks(?:.*?\[ready ranks: (?P<ready>\d[\d, ]*)\])?)",
     codes::kCollectiveStall, kWarn, kCause,
     "Horovod: tensors some ranks submitted wait for the other ranks (a stall, reported by this rank)",
     "Some ranks never submitted the same tensors: a rank-dependent branch or uneven data makes ranks submit different "
     "tensors, or some ranks stopped submitting (hung, died, or still busy). The ranks named missing (or absent from "
     "the ready ranks) are the ones to look at: their stacks or last lines say where they are.",
     "https://horovod.readthedocs.io/en/stable/troubleshooting_include.html"},
    // Warnings: Horovod warns after HOROVOD_STALL_CHECK_TIME_SECONDS (60 s), and a slow rank (a long
    // checkpoint on rank 0) may still catch up.
    {"horovod_missing_ranks", R"(\[missing ranks: (?P<peer_ranks>\d[\d, ]*)\])", codes::kRankMissing, kWarn, kCause,
     "Horovod: a tensor's collective stalled: these ranks had not submitted it",
     "The other ranks wait for these ranks' tensor: look at where they are (their stacks or last lines). A "
     "rank-dependent branch, uneven data, or a rank that hung or died is the usual cause.",
     "https://horovod.readthedocs.io/en/stable/troubleshooting_include.html"},
    // Ray: the raylet's notice of a worker process that died (on the head or in the driver's error),
    // naming its node and pid when it has them; the driver's ActorDiedError is its echo.
    {"ray_worker_died",
     R"((?:Worker IP address: (?P<self_host>[\w.:-]+) Worker port: \d+ Worker PID: (?P<self_pid>\d+) )?Worker exit type: (?P<type>SYSTEM_ERROR|NODE_OUT_OF_MEMORY|USER_ERROR) Worker exit detail: (?P<detail>[^.\n]{1,200}))",
     codes::kRankExited, kErr, kCause, "Ray: a worker process died ({type}): {detail}",
     "Ray names the usual causes: the OOM killer (check `dmesg` and the node's memory; NODE_OUT_OF_MEMORY is Ray's own "
     "memory monitor: fewer workers per node or a smaller batch), a crash of the process (SIGSEGV, a CUDA or NCCL abort: "
     "its own log on that node, /tmp/ray/session_latest/logs/worker-*-PID.err, has the first error), or `ray stop`. A "
     "'connection error code 2' means the worker vanished without saying why: that log says it.",
     "https://docs.ray.io/en/latest/ray-core/fault_tolerance/actors.html"},
    {"ray_actor_died",
     R"((?:ActorDiedError: The actor died unexpectedly|The actor is dead because its worker process has died|ray\.exceptions\.RayActorError))",
     codes::kRankExited, kErr, kConseq, "Ray: an actor died before finishing its task",
     "The actor's worker process died; the driver only sees that. The worker's own log (its node and pid follow this "
     "line, or the raylet's 'Worker exit type' line names them) has the first error: an OOM kill, a crash, or a NCCL "
     "or CUDA error in that worker.",
     "https://docs.ray.io/en/latest/ray-core/fault_tolerance/actors.html"},
    // jax.distributed's barriers before the coordination service's "Id:" wording (jax 0.4).
    {"jax_barrier_timeout", R"(DEADLINE_EXCEEDED: Barrier timed out\. Barrier_id: (?P<id>[\w.:-]*[\w:-]))",
     codes::kRankMissing, kErr, kCause, "JAX: barrier {id} timed out: some processes never reached it",
     "The tasks named after 'Timed out task names' never reached the barrier: they died, hang elsewhere, or are still "
     "busy (compiling, loading data); their own logs say which. Every process must call the same multihost functions "
     "in the same order, and jax.distributed.initialize needs the same coordinator_address and num_processes "
     "everywhere.",
     "https://jax.readthedocs.io/en/latest/multi_process.html"},
    // A launcher that refused its own command line started no rank at all: without these the log of
    // such a run read as clean.
    {"launcher_bad_option",
     R"(^(?P<launcher>mpirun|mpiexec|orterun|prterun|prun|srun|salloc|sbatch|torchrun|deepspeed)(?:: Error)?: (?:unknown|unrecognized|invalid) option(?: --)? [^\w\n-]{0,3}(?P<option>-*[\w.=-]+))",
     codes::kLaunchError, kErr, kCause, "{launcher} refused its option {option} and started no rank",
     "{launcher} does not know {option}: check its spelling against `{launcher} --help`, and that the {launcher} "
     "found first in PATH is the one meant (`which {launcher}; {launcher} --version`). Launchers of other versions "
     "differ: Open MPI 5's mpirun (PRRTE) renamed options of Open MPI 4 (--oversubscribe became --map-by "
     ":OVERSUBSCRIBE), and MPICH's mpiexec takes other options than Open MPI's mpirun.",
     OMPI_FAQ},
    {"hydra_bad_argument",
     R"(\[(?P<launcher>mpiexec|mpirun)@(?P<host>[^\]]+)\] match_arg \([^)]*\): unrecognized argument (?P<option>\S+))",
     codes::kLaunchError, kErr, kCause, "MPICH's {launcher} (Hydra) refused its argument {option} and started no rank",
     "Hydra's mpiexec does not know {option}: an Open MPI option (-x, --oversubscribe, --mca) given to MPICH's "
     "mpiexec, or a typo. Use Hydra's own (-genv NAME VALUE, -env), or run the Open MPI mpirun the program was "
     "built with (`which mpiexec; mpiexec --version`).",
     "https://github.com/pmodels/mpich/blob/main/doc/wiki/how_to/Using_the_Hydra_Process_Manager.md"},
    // DeepSpeed ZeRO-3 found a parameter still partitioned where it was about to be used.
    // Its assertion's source line, or the exception line that ends the traceback (the parameter's summary).
    {"deepspeed_zero3_param_unavailable",
     R"((?:ds_status == ZeroParamStatus\.AVAILABLE|AssertionError: \{'id': \d+, 'status': '(?:NOT_AVAILABLE|INFLIGHT)'))",
     codes::kLogError, kErr, kCause,
     "DeepSpeed ZeRO-3: a parameter was used while still partitioned (not gathered)",
     "A module's parameters were used outside the hooks ZeRO-3 gathers them in: a submodule called directly or "
     "through another module's forward, weights tied or shared across modules, parameters read in a custom hook, "
     "or ranks running different code paths so that the prefetch order differs between them. Wrap such uses in "
     "`deepspeed.zero.GatheredParameters(...)`, make every rank run the same modules in the same order, and try "
     "`stage3_prefetch_bucket_size: 0` to rule out prefetching; newer DeepSpeed releases fix several such cases.",
     "https://deepspeed.readthedocs.io/en/latest/zero3.html"},
    // The legacy launchers (torch.distributed.launch, deepspeed) pass every rank --local_rank (torch
    // 2.x spells it --local-rank); a script whose argparse lacks that spelling exits with code 2.
    {"script_rejects_local_rank", R"(: error: unrecognized arguments: (?P<option>(?:\S+ )*--local[_-]rank\b(?:=\d+)?))",
     codes::kLaunchError, kErr, kCause, "the script refused the launcher's {option}",
     "torch.distributed.launch and the deepspeed launcher pass every rank --local_rank, spelled --local-rank since "
     "torch 2.0; the script's argument parser does not accept that spelling. Accept both "
     "(parser.add_argument(\"--local_rank\", \"--local-rank\", type=int, default=-1)), or read "
     "os.environ[\"LOCAL_RANK\"] and launch with torchrun, which passes no such argument.",
     TORCH_DIST},
    {"script_rejects_arguments",
     R"(^(?P<program>[^:\n]+): error: (?P<option>(?:unrecognized arguments|the following arguments are required|argument [^:\n]+: (?:invalid|expected)).*))",
     codes::kLaunchError, kErr, kCause, "{program} refused its command line: {option}",
     "The program's argument parser rejected the arguments the launch command gave it, so every rank exited (code 2) "
     "before any collective: fix the command after the launcher's own options (a typo, an option of another version "
     "of the script, a value of the wrong type), or accept the option in the script.",
     ""},
    // A launcher passing on a signal it received: the job was stopped (or suspended) from outside.
    {"launcher_forwarding_signal",
     R"((?P<launcher>mpirun|mpiexec|prterun|srun): [Ff]orwarding signal (?P<signal>1|2|3|9|15|20) to job)",
     codes::kLaunchError, kErr, kCause, "{launcher} received signal {signal} and passed it on to the job",
     "The launcher itself was signalled, from its terminal, a person or the scheduler, and passed it on: the job "
     "ended or stopped from outside, not by a fault of its own, and the errors after this line follow from it. "
     "{meaning}",
     OMPI_FAQ},
    // kubectl exec (MPI operators start each worker pod's daemon through it): the pod's process ended.
    {"k8s_exec_terminated", R"(^command terminated with exit code (?P<exit_code>\d+))", codes::kLaunchError, kErr,
     kCause, "kubectl exec: the command in the pod ended with exit code {exit_code}",
     "{meaning} `kubectl describe pod` on the worker pod says whether it was OOMKilled or Evicted and what its "
     "memory limit is; an MPI job's daemons on that pod end with it, which mpirun then reports as a lost daemon.",
     "https://kubernetes.io/docs/tasks/debug/debug-application/debug-running-pod/"},
    {"elastic_failed",
     R"(failed \(exitcode: (?P<exit_code>-?\d+)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\) of binary)",
     codes::kRankExited, kErr, kExit, "torchrun: local rank {local_rank} failed with exit code {exit_code}",
     "torchrun saw this worker fail and stopped the others; the worker's own output says why. {meaning}",
     TORCH_ELASTIC},
    {"elastic_closing_signal",
     R"((?:Sending process (?P<pid>\d+) closing signal|Closing process (?P<pid2>\d+) via signal) (?P<signame>SIG\w+))",
     codes::kRankExited, kInfo, kContext, "torchrun stops worker {pid} ({signame}) after another failed", "",
     TORCH_ELASTIC},
    {"elastic_agent_signal", R"(SignalException: Process (?P<pid>\d+) got signal: (?P<signal>\d+))",
     codes::kLaunchError, kErr, kCause, "torchrun (pid {pid}) was sent signal {signal} and stopped its workers",
     "Something outside the job stopped torchrun itself: signal 15 (SIGTERM) is a scheduler's time limit or preemption "
     "(Slurm, Kubernetes) or a person's kill, 1 (SIGHUP) a closed terminal or ssh session (run under nohup, tmux or "
     "the scheduler), 9 a memory limit; the scheduler's records (sacct, kubectl describe) say which.",
     TORCH_ELASTIC},
    {"elastic_signal_received", R"(Signal (?P<signal>\d+) \((?P<signame>SIG\w+)\) received by PID (?P<pid>\d+))",
     codes::kRankExited, kErr, kExit, "worker {pid} received {signame}",
     "torchrun's worker died of a signal. {meaning}", TORCH_ELASTIC},
    {"ds_launcher_exit_rank", R"(--local_rank=(?P<local_rank>\d+).*exits with return code = (?P<exit_code>-?\d+))",
     codes::kRankExited, kErr, kExit, "DeepSpeed launcher: local rank {local_rank} exited with code {exit_code}",
     "DeepSpeed's launcher saw this worker fail and killed the others on the node; the worker's own lines above say "
     "why. {meaning}",
     DS_LAUNCH},
    {"ds_launcher_exit", R"(exits with return code = (?P<exit_code>-?\d+))", codes::kRankExited, kErr, kExit,
     "DeepSpeed launcher: a worker exited with code {exit_code}",
     "DeepSpeed's launcher saw this worker fail and killed the others on the node; the worker's own lines above say "
     "why. {meaning}",
     DS_LAUNCH},
    {"ds_launcher_killing", R"(\[launch\.py:\d+:sigkill_handler\] Killing subprocess (?P<pid>\d+))", codes::kRankExited,
     kInfo, kContext, "DeepSpeed launcher kills worker {pid}", "", DS_LAUNCH},
    {"ssh_connect_failed", R"(ssh: connect to host (?P<host>\S+) port (?P<port>\d+): (?P<error>.+))",
     codes::kLaunchError, kErr, kCause, "ssh to {host}:{port} failed: {error}",
     "The launcher (deepspeed/pdsh/mpirun) could not ssh to {host}: check the host name in the hostfile, that sshd "
     "runs "
     "there, and passwordless ssh from this node (`ssh {host} true`).",
     DS_LAUNCH},
    {"ds_host_not_reachable", R"(Using hostfile at (?P<hostfile>\S+) but host=(?P<host>\S+) was not reachable via ssh)",
     codes::kLaunchError, kErr, kCause, "DeepSpeed's launcher could not ssh to {host} (hostfile {hostfile})",
     "The deepspeed launcher checks every hostfile host with `ssh <host> hostname` first: set up passwordless ssh to "
     "{host} from this node (and accept its host key), fix the name in {hostfile}, or remove the hostfile for a "
     "single-node run.",
     DS_LAUNCH},
    {"ssh_host_unresolved", R"(ssh: Could not resolve hostname (?P<host>\S+):)", codes::kLaunchError, kErr, kCause,
     "ssh could not resolve {host}", "Fix the hostfile entry {host} or /etc/hosts / DNS on the launching node.",
     DS_LAUNCH},
    {"ssh_permission_denied", R"(Permission denied \((?:publickey|password)[^)]*\))", codes::kLaunchError, kErr, kCause,
     "ssh authentication failed",
     "The launcher needs passwordless ssh to every node: install this user's public key on them (ssh-copy-id).",
     DS_LAUNCH},
    {"pdsh_ssh_unreachable", R"(pdsh@(?P<from>[^:]+): (?P<host>[^:]+): ssh exited with exit code 255)",
     codes::kLaunchError, kErr, kCause, "pdsh could not run the job on {host} (ssh exit code 255)",
     "ssh itself failed to reach {host} or to log in: check the host name in the hostfile, sshd on the node, and "
     "passwordless ssh from the launching node (`ssh {host} true`).",
     DS_LAUNCH},
    {"pdsh_ssh_exit", R"(pdsh@(?P<from>[^:]+): (?P<host>[^:]+): ssh exited with exit code (?P<exit_code>\d+))",
     codes::kLaunchError, kWarn, kConseq, "pdsh: the job on {host} ended with exit code {exit_code}",
     "The processes on {host} failed; their own lines above (prefixed with {host}:) say why.", DS_LAUNCH},
    {"pdsh_command_timeout", R"(pdsh@(?P<from>[^:]+): (?P<host>[^:]+): command timeout)", codes::kLaunchError, kErr,
     kCause, "pdsh: the command on {host} timed out", "pdsh gave up on {host}: the node is unreachable or hung.",
     DS_LAUNCH},
    {"slurm_task_oom", R"(^srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,-]+): Out Of Memory)",
     codes::kOutOfMemory, kErr, kCause, "Slurm: tasks {tasks} on {host} ran out of memory",
     "The job step hit its memory limit (cgroup OOM): ask for more memory (--mem / --mem-per-gpu) or lower host memory "
     "use "
     "(data-loader workers, dataset in RAM, CPU offload).",
     "https://slurm.schedmd.com/srun.html"},
    // Terminated (SIGTERM) is how Slurm ends a step's tasks when the step is cancelled (a time limit,
    // scancel, a node failure) or after another task failed: the reason is elsewhere.
    {"slurm_task_terminated",
     R"(^srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,-]+): (?P<what>Terminated|Hangup|Interrupt))",
     codes::kRankExited, kWarn, kConseq, "Slurm: tasks {tasks} on {host}: {what} (ended by a signal Slurm sent)",
     "Slurm ended these tasks: the step was cancelled (its time limit, scancel, a failed node) or another task "
     "failed first. The cancellation line (`CANCELLED AT … DUE TO …`) or the first failing task says why; `sacct -j "
     "JOBID` shows the job's state and reason.",
     "https://slurm.schedmd.com/srun.html"},
    {"slurm_task_exit",
     R"(^srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,-]+): (?P<what>Exited with exit code (?P<exit_code>\d+)|Killed|Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction))",
     codes::kRankExited, kErr, kCause, "Slurm: tasks {tasks} on {host}: {what}",
     "srun reports how these tasks ended; the first task to fail (its own output) is the cause, the rest usually "
     "follow it. {meaning}",
     "https://slurm.schedmd.com/srun.html"},
    {"slurm_oom_kill", R"(Detected (?P<count>\d+) oom[-_ ]kill events?)", codes::kOutOfMemory, kErr, kCause,
     "Slurm: the step's cgroup OOM killer fired ({count} times)",
     "A process of the step exceeded the memory the job asked for: request more (--mem / --mem-per-gpu) or lower host "
     "memory use.",
     "https://slurm.schedmd.com/sbatch.html"},
    {"slurm_step_mem_exceeded",
     R"((?:StepId=|[Ss]tep |Job )(?P<step>\d[\w.+]*) exceeded memory limit \((?P<used>\d+) > (?P<limit>\d+)\))",
     codes::kOutOfMemory, kErr, kCause, "Slurm killed step {step}: it used {used} bytes, over its limit of {limit}",
     "Slurm's memory accounting (JobAcctGatherParams=OverMemoryKill) killed the whole step on this node, its ranks "
     "with it: ask for more memory (--mem / --mem-per-cpu / --mem-per-gpu) or lower host memory use (data-loader "
     "workers, dataset in RAM, pinned memory, CPU offload).",
     "https://slurm.schedmd.com/slurm.conf.html#OPT_OverMemoryKill"},
    {"slurm_mem_exceeded", R"(Exceeded (?:job|step) memory limit(?P<when> at some point)?)", codes::kOutOfMemory, kWarn,
     kConseq, "Slurm: the step exceeded its memory limit{when}",
     "The step reached the memory the job asked for. 'at some point' with no kill often counts the page cache of "
     "files read (harmless); with a kill or 'Killed' tasks beside it, ask for more memory (--mem) or use less.",
     "https://slurm.schedmd.com/sbatch.html"},
    {"slurm_cancelled",
     R"(\*\*\* (?:STEP|JOB) (?P<step>\S+) ON (?P<host>\S+) CANCELLED AT (?P<at>\S+)(?P<why>.*)\*\*\*)",
     codes::kLaunchError, kErr, kCause, "Slurm cancelled {step} on {host} at {at}{why}",
     "The scheduler ended the job: DUE TO TIME LIMIT means --time ran out (checkpoint more often or ask for more "
     "time); "
     "otherwise a person or a node failure cancelled it (sacct -j shows why).",
     "https://slurm.schedmd.com/scancel.html"},
    {"ds_build_extension", R"(Error building extension '(?P<extension>[^']+)')", codes::kLogError, kErr, kCause,
     "DeepSpeed could not JIT-build its {extension} op",
     "The op's JIT build failed: install ninja and a CUDA toolkit matching torch.version.cuda, or pre-build the ops "
     "(DS_BUILD_OPS=1 pip install deepspeed), or pick an optimizer that needs no custom op.",
     "https://www.deepspeed.ai/tutorials/advanced-install/"},
    {"mpi_daemon_start", R"((?:ORTE|PRTE) was unable to reliably start one or more daemons)", codes::kLaunchError, kErr,
     kCause, "mpirun could not start its daemons on the nodes",
     "mpirun's ssh/launch of orted/prted failed on a node: check passwordless ssh to every node, that the same Open "
     "MPI is "
     "in the PATH there, and that no firewall blocks the daemons' TCP ports (--mca oob_tcp_if_include <iface>).",
     OMPI_FAQ},
    {"mpi_daemon_lost",
     R"((?:An? (?:ORTE|PRTE) daemon has unexpectedly failed after launch|(?:ORTE|PRTE) has lost communication with (?:a|its) (?:remote )?daemon))",
     codes::kLaunchError, kErr, kCause, "mpirun lost a daemon",
     "A node's daemon died or became unreachable (node crash, OOM, network cut): check that node's kernel log and the "
     "network between it and the launching node.",
     OMPI_FAQ},
    // UCX's InfiniBand completion errors (ib_mlx5_log.c): "[host:pid:0:tid] ib_mlx5_log.c:143  Transport retry
    // count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)" (UCX 1.9), or "… Error on QP 0x… wqe[…]:
    // Transport retry count exceeded (synd …)" (later releases); the failed request follows with the peer's LID.
    {"ucx_ib_completion_error",
     R"((?:\[(?P<self_host>[A-Za-z][\w.-]*):(?P<self_pid>\d+)(?::\d+){1,2}\] +)?ib_(?:mlx5_)?log\.c:\d+ +(?:UCX +\w+ +)?(?:Error on QP 0x[0-9a-fA-F]+ wqe\[\d+\]: )?(?P<what>Transport retry count exceeded|Receive-no-ready retry count exceeded|Remote side aborted|Remote access|Remote QP|Remote OP|Local protection|Local access|Local length|Local QP operation|Invalid request|Bad response|WR flushed because QP in error state|Memory window bind)(?: error)?(?: on (?P<device>[\w:/.-]+))?)",
     codes::kCommError, kErr, kCause, "UCX: an InfiniBand request failed: {what}",
     "'Transport retry count exceeded': the HCA resent until it gave up, so the peer (the LID on the next line; "
     "nodes that all name one LID point at it) was unreachable: a bad cable, port or switch, the peer node hung or "
     "rebooted, or the fabric being reconfigured. Check `ibstat` and the port counters on both ends (`perfquery`, "
     "`ibqueryerrors`); UCX_RC_TIMEOUT and UCX_RC_RETRY_COUNT only tolerate a flaky fabric. 'Remote access' or "
     "'Local protection': memory registration (GPUDirect RDMA: nvidia-peermem) or a peer that freed its buffer. "
     "'Remote side aborted' or 'WR flushed': the connection was torn down, usually because the peer process died "
     "first: find its first error.",
     IBV_WC},
    {"ucx_ib_failed_request",
     R"(wqe\[\d+\]: \w+[^\n]*\[rqpn 0x[0-9a-fA-F]+ (?P<peer>rlid (?P<lid>\d+))\])", codes::kCommError, kWarn, kConseq,
     "UCX: the failed InfiniBand request went to the port with LID {lid}",
     "Several nodes naming one LID point at that port's node (`ibaddr -l {lid}` or `smpquery nodedesc -L {lid}` "
     "names it): check it and its link first.",
     IBV_WC},
    // UCX (Open MPI's pml ucx, NCCL's UCX plugin): "rc_iface.c:966  UCX  ERROR failed to create qp: …".
    {"ucx_create_qp", R"(UCX +ERROR +(?:failed to create qp|ibv_create_qp\w*\(\) failed)(?P<rest>.*))",
     codes::kCommError, kErr, kCause, "UCX could not create an InfiniBand queue pair{rest}",
     "The HCA ran out of queue pairs or of locked memory: UCX's RC transport needs a queue pair per peer, too many "
     "at thousands of ranks. Use a transport that scales (UCX_TLS=dc,self,sm, or ud), raise the locked-memory limit "
     "(`ulimit -l unlimited` on every node), and compare with the HCA's max_qp (`ibv_devinfo -v`).",
     "https://openucx.readthedocs.io/en/master/faq.html"},
    {"ucx_error", R"((?:UCX +(?:ERROR|FATAL) +(?P<message>.+)|pml_ucx\.c:\d+ +Error: (?P<message2>.+)))",
     codes::kCommError, kErr, kCause, "UCX: {message}{message2}",
     "UCX (under Open MPI's pml ucx or NCCL's UCX plugin) failed: the message names the transport. UCX_LOG_LEVEL=info "
     "shows which devices it chose; UCX_TLS and UCX_NET_DEVICES choose others.",
     "https://openucx.readthedocs.io/en/master/faq.html"},
    {"mpi_tcp_connect", R"(Open MPI failed to TCP connect to a peer MPI process)", codes::kCommError, kErr, kCause,
     "Open MPI's TCP transport could not connect to a peer",
     "btl_tcp picked an interface the peer cannot reach (docker0 172.17.x, virbr, a NAT or down interface): restrict "
     "it "
     "with --mca btl_tcp_if_include <iface or subnet> (and oob_tcp_if_include), or open the ports in the firewall.",
     OMPI_TCP},
    {"mpi_connect_bridge",
     R"(connect\(\) to (?P<address>172\.1[7-9]\.\d+\.\d+|192\.168\.122\.\d+|169\.254\.\d+\.\d+|10\.0\.2\.\d+):(?P<port>\d+) failed)",
     codes::kCommError, kErr, kCause, "Open MPI dialled {address}:{port}, a docker/libvirt/link-local address",
     "btl_tcp offered the peer an address of a local bridge (docker0 172.17-19.x, virbr0 192.168.122.x, link-local "
     "169.254.x, a NAT 10.0.2.x) that other nodes cannot reach: restrict it to the cluster network with "
     "--mca btl_tcp_if_include <iface or CIDR> (and --mca oob_tcp_if_include), or exclude the bridges with "
     "--mca btl_tcp_if_exclude lo,docker0,virbr0.",
     OMPI_TCP},
    {"mpi_connect_detail", R"(connect\(\) to (?P<address>[0-9.]+):(?P<port>\d+) failed)", codes::kCommError, kErr,
     kCause, "Open MPI: connect() to {address}:{port} failed",
     "If {address} is a docker/bridge/NAT address (172.17.x.x, 192.168.122.x) btl_tcp chose the wrong interface: set "
     "--mca "
     "btl_tcp_if_include to the cluster network; otherwise a firewall blocks the port.",
     OMPI_TCP},
    {"mpi_unreachable", R"(unable to complete a TCP connection)", codes::kCommError, kErr, kCause,
     "Open MPI could not complete a TCP connection between processes",
     "A firewall between the nodes or the wrong interface: --mca btl_tcp_if_include / oob_tcp_if_include <iface>.",
     OMPI_TCP},
    {"mpi_not_enough_slots", R"(There are not enough slots available in the system)", codes::kLaunchError, kErr, kCause,
     "mpirun: not enough slots for the requested processes",
     "The hostfile offers fewer slots than -np asks for: add slots=N to the hostfile lines, lower -np, or use "
     "--oversubscribe on purpose.",
     OMPI_FAQ},
    {"mpirun_noticed",
     R"((?:mpirun|mpiexec|prterun) noticed that process rank (?P<subject>\d+) with PID (?P<pid>\d+) on node (?P<host>\S+) exited on signal (?P<signal>\d+))",
     codes::kRankExited, kErr, kExit, "mpirun: rank {subject} on {host} died of signal {signal}",
     "mpirun saw this rank die and ended the others; the rank's own output says why. {meaning}", OMPI_FAQ},
    {"mpirun_exited_due_to",
     R"((?:mpirun|mpiexec|prterun) has exited due to process rank (?P<subject>\d+) with PID (?P<pid>\d+) on\s+node (?P<host>\S+))",
     codes::kRankExited, kErr, kExit, "mpirun: rank {subject} on {host} exited without finalizing",
     "This rank exited (or called exit) before MPI_Finalize; its own output says why.", OMPI_FAQ},
    {"mpirun_exit_code", R"(mpirun detected that one or more processes exited with non-zero status)",
     codes::kRankExited, kErr, kContext, "mpirun: a process exited with a non-zero status (the rank follows)",
     "The first failing process is named in the lines that follow (Process name / Exit code); its own output says why.",
     OMPI_FAQ},
    // MPICH and Cray MPICH: "Abort(1) (rank 3 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1) -
    // process 3".
    {"mpich_abort", R"(application called MPI_Abort\((?P<comm>[^,\n]*), (?P<code>-?\d+)\) - process (?P<subject>\d+))",
     codes::kCommError, kErr, kCause, "rank {subject} called MPI_Abort (error code {code})",
     "Rank {subject} ended the job on purpose: the program, or a library on that rank, met an error it could not go "
     "on from. Its own output just before this line says which.",
     "https://www.mpich.org/static/docs/latest/www3/MPI_Abort.html"},
    {"mpi_abort", R"(MPI_ABORT was invoked on rank (?P<subject>\d+))", codes::kCommError, kErr, kCause,
     "MPI_ABORT was called on rank {subject}", "Rank {subject} aborted the job on purpose: its own output says why.",
     OMPI_FAQ},
    // MPICH, Intel MPI and Cray MPICH: "Fatal error in PMPI_Allreduce: Other MPI error, error stack:" (Cray
    // prefixes "MPICH ERROR [Rank N] [job id …] [date] [node] - Abort(…) (rank N in comm 0): ").
    {"mpich_fatal_error",
     R"((?:MPICH ERROR \[Rank \d+\] (?:\[[^\]\n]*\] )*?\[(?P<self_host>[\w.-]+)\] - )?(?:.*?\(rank (?P<self_rank>\d+) in comm \d+\): )?.*?Fatal error in P?MPI_(?P<call>\w+): (?P<error>[^,\n]+))",
     codes::kCommError, kErr, kCause, "MPI_{call} failed: {error}",
     "MPICH's (or Intel MPI's, Cray MPICH's) error stack follows this line and names the layer that failed. OFI or "
     "libfabric errors (`OFI poll failed`, `CANCELED`) are the fabric, or a peer that ended first (scancel, a time "
     "limit, another rank's crash: find the job's first failure); 'Message truncated' or 'Invalid count' mean the "
     "ranks' calls do not match; 'Communication failure' or 'Connection refused' over TCP mean the network or a "
     "firewall between the nodes (`dsdoctor check`).",
     "https://www.mpich.org/static/docs/latest/www3/MPI_Errhandler_set.html"},
    {"mpi_error", R"((?:MPI_ERR_\w+|An error occurred in MPI_\w+))", codes::kCommError, kErr, kCause,
     "an MPI call failed",
     "The message names the MPI call and error class: with btl/tcp check the interfaces (--mca btl_tcp_if_include) and "
     "firewalls; a truncation or type error means the ranks' calls do not match.",
     OMPI_FAQ},

    // ---- Gloo and plain sockets -------------------------------------------------------------------
    {"gloo_size_mismatch",
     R"(enforce fail at [^\]]*gloo[^\]]*\] op\.preamble\.length <= op\.nbytes\. (?P<got>\d+) vs (?P<expected>\d+))",
     codes::kCollectiveMismatch, kErr, kCause, "Gloo: a peer sent {got} bytes where {expected} were expected",
     "The ranks called the same collective with different tensor sizes: every rank must pass tensors of the same shape "
     "(look for rank-dependent shapes or a last batch of another size).",
     TORCH_DIST},
    {"gloo_connect_loopback", R"(connect \[(?P<peer>127\.\d+\.\d+\.\d+|::1)\]:(?P<port>\d+): (?P<error>.+))",
     codes::kCommError, kErr, kCause, "Gloo could not connect to a loopback address {peer}:{port} ({error})",
     "A rank advertised a loopback address: its host name resolves to 127.0.1.1 (Debian's and Ubuntu's /etc/hosts) "
     "or GLOO_SOCKET_IFNAME=lo. Peers on other nodes dial themselves. Set GLOO_SOCKET_IFNAME to the cluster "
     "network's interface on every node, or map the host name to its real address in /etc/hosts. On one node, the "
     "local peer died or never started (its own first error says why).",
     TORCH_DIST},
    // Gloo builds a connection to every other rank at the address each advertised.
    {"gloo_full_mesh", R"(Gloo connectFullMesh failed with (?P<reason>.+))", codes::kCommError, kErr, kCause,
     "Gloo could not connect every rank to every other: {reason}",
     "A rank advertised an address the others cannot reach: a container's or NAT address, the wrong interface, or a "
     "host name resolving to 127.0.1.1. Set GLOO_SOCKET_IFNAME to the interface of the network between the nodes on "
     "every rank (`ip -br addr`; under Ray or vLLM, VLLM_HOST_IP too), and check that no firewall blocks the "
     "ephemeral ports between them (`dsdoctor check`).",
     TORCH_DIST},
    {"gloo_enforce", R"(\[enforce fail at (?P<where>[^\]]+)\] (?P<condition>.+))", codes::kCommError, kErr, kCause,
     "Gloo check failed: {condition}",
     "Gloo found an inconsistency between ranks or a broken connection; see the condition.", TORCH_DIST},
    {"gloo_timeout", R"(Timed out waiting (?P<ms>\d+)ms for (?P<what>\w+) operation)", codes::kCommError, kErr, kCause,
     "Gloo timed out after {ms} ms waiting for a {what}",
     "Gloo waited for a peer's data until its timeout: the peer never made the matching call (find the rank that did "
     "not), "
     "or the link between them is blocked.",
     TORCH_DIST},
    // slurmstepd could not tell srun that a task ended: srun was gone already (the step was being torn
    // down). Not the job's own connection, whatever the words.
    {"slurm_task_exit_unsent", R"(slurmstepd(?:-[\w.-]+)?: error: Failed to send MESSAGE_TASK_EXIT)", codes::kLaunchError,
     kWarn, kConseq, "slurmstepd could not report a task's exit to srun (srun had already gone)",
     "A consequence of the step ending (cancelled, timed out, or srun killed): the other Slurm lines say why. It is "
     "Slurm's own connection, not the job's.",
     "https://slurm.schedmd.com/srun.html"},
    {"peer_closed", R"(Connection closed by peer(?: \[(?P<peer>[^\]]+)\]:(?P<port>\d+))?)", codes::kCommError, kErr,
     kConseq, "connection closed by peer", kPeerDiedRemedy, ""},
    {"peer_reset", R"((?:Connection reset by peer|\bECONNRESET\b))", codes::kCommError, kErr, kConseq,
     "connection reset by peer", kPeerDiedRemedy, ""},
    {"broken_pipe", R"((?:Broken pipe|\bEPIPE\b))", codes::kCommError, kErr, kConseq,
     "broken pipe (the peer closed first)", kPeerDiedRemedy, ""},
    {"socket_refused", R"((?:Connection refused|\bECONNREFUSED\b))", codes::kCommError, kErr, kCause,
     "connection refused",
     "Nothing listened at the address this rank dialled: the peer or the rendezvous (MASTER_ADDR:MASTER_PORT) had not "
     "started yet or had died, a REJECT firewall rule, or the wrong interface (GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME). "
     "`dsdoctor check` tells these apart.",
     ""},
    {"socket_no_route", R"((?:No route to host|Network is unreachable|\bEHOSTUNREACH\b|\bENETUNREACH\b))",
     codes::kCommError, kErr, kCause, "no route to the peer",
     "The peer's address is not routable from this node: a wrong MASTER_ADDR or interface (GLOO_SOCKET_IFNAME / "
     "NCCL_SOCKET_IFNAME), or a firewall answering with host-unreachable.",
     ""},

    // The store-based barrier of init_process_group (torch < 2.1): how many processes checked in.
    {"torch_store_barrier_timeout",
     R"(store based barrier on rank: (?P<self_rank>\d+), for key: \S+ \(world_size=(?P<world>\d+), worker_count=(?P<workers>\d+))",
     codes::kRendezvousError, kErr, kCause,
     "init_process_group's barrier timed out: {workers} processes checked in for a world of {world}",
     "Fewer processes than the world size: some ranks never reached init_process_group (died, hung, or started late: "
     "their logs say where). More than the world size: processes of another attempt or job use the same "
     "MASTER_ADDR:MASTER_PORT store (a requeued or preempted Slurm job whose old processes still run, two jobs on one "
     "port): use a port of its own per job and attempt (derive it from SLURM_JOB_ID and the restart count) and make "
     "sure the old processes are gone.",
     TORCH_DIST},
    // ---- CUDA and memory --------------------------------------------------------------------------------
    {"cuda_oom",
     R"((?:CUDA out of memory|OutOfMemoryError: CUDA|CUBLAS_STATUS_ALLOC_FAILED|CUDA error: out of memory))",
     codes::kOutOfMemory, kErr, kCause, "the GPU ran out of memory",
     "Lower the micro batch size, enable activation checkpointing, ZeRO stage 2/3 or offload; "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps when reserved-but-unallocated memory is large.",
     TORCH_CUDA_SEM},
    {"cuda_illegal_address",
     R"((?:an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS))",
     codes::kCudaError, kErr, kCause, "CUDA: an illegal memory access",
     "A kernel read or wrote out of bounds (an index/shape bug, a custom kernel, or a library bug); rerun with "
     "CUDA_LAUNCH_BLOCKING=1 to see the kernel, or under compute-sanitizer. The error also poisons NCCL on this rank, "
     "so "
     "the others fail after it.",
     CUDA_ERR},
    {"cuda_invalid_ordinal", R"((?:invalid device ordinal|cudaErrorInvalidDevice\b|CUDA_ERROR_INVALID_DEVICE))",
     codes::kCudaError, kErr, kCause, "CUDA: the rank asked for a GPU this node does not have (invalid device ordinal)",
     "More ranks were started on this node than it has visible GPUs, or the rank picks its GPU by global rank: start "
     "as many ranks per node as GPUs (slots, --num_gpus, --nproc_per_node), select the GPU with "
     "torch.cuda.set_device(LOCAL_RANK), and check CUDA_VISIBLE_DEVICES on this node.",
     CUDA_ERR},
    {"cuda_device_assert", R"(device-side assert(?:ion)? triggered)", codes::kCudaError, kErr, kCause,
     "CUDA: a device-side assert fired",
     "Usually an index out of range (labels >= num_classes, token ids >= vocab size): rerun with "
     "CUDA_LAUNCH_BLOCKING=1 "
     "(and TORCH_USE_CUDA_DSA=1) for the failing op.",
     CUDA_ERR},
    // ---- the GPU itself: the kernel driver's Xid events, a GPU the driver lost, PCIe errors -----------
    // "NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus." (dmesg, journalctl -k): the driver's
    // report of a GPU fault, with the process it hit when there is one ("pid=…, name=python3, …").
    {"nvidia_xid",
     R"(NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), (?:pid=(?P<pid>[^,\s]*), )?(?:name=(?P<name>[^,]*), )?(?P<detail>[^\n]{0,200}))",
     codes::kCudaError, kErr, kCause, "GPU {pci}: NVIDIA Xid {xid}: {detail}",
     "The GPU driver reported a fault of the GPU at PCI {pci}: the rank on that GPU hangs or fails, and its peers "
     "time out. Xid 79 (fallen off the bus), 48, 63, 64, 92, 94, 95 (ECC and row remapping), 74 (NVLink), 119, 120 "
     "(GSP firmware) and 154 (recovery needed) are the GPU or the node: drain the node, and reset the GPU or reboot "
     "(`nvidia-smi -q` shows ECC and remapping state); if it recurs, the hardware needs service (PCIe link, power, "
     "cooling). 13, 31, 43 and 45 are usually the program's own fault (an illegal address, a killed process) or the "
     "echo of an earlier Xid: the rank's own error says which. NVIDIA's Xid catalogue names each one.",
     "https://docs.nvidia.com/deploy/xid-errors/index.html"},
    // The driver's own words when it loses a GPU, with or without an Xid ("NVRM: The NVIDIA GPU 0000:b3:00.0
    // … has fallen off the bus and is not responding to commands.").
    {"nvidia_gpu_fell_off_bus", R"((?:GPU has |has |\b)fallen off the bus)", codes::kCudaError, kErr, kCause,
     "a GPU fell off the bus: the driver lost it",
     "The GPU stopped answering on PCIe (power, cooling, the slot or riser, or the GPU itself): every rank on it "
     "hangs or fails. Drain the node; it needs a reboot, and service if it recurs (`dmesg -T | grep -e NVRM -e AER` "
     "says which GPU).",
     "https://docs.nvidia.com/deploy/xid-errors/index.html"},
    // nvidia-smi on a node whose GPU the driver lost: "Unable to determine the device handle for
    // GPU0000:03:00.0: Unknown Error" (or "GPU is lost").
    {"nvidia_smi_gpu_lost",
     R"(Unable to determine the device handle for GPU ?(?P<pci>[0-9A-Fa-f:.]+): (?P<error>[^\n]{1,100}))",
     codes::kCudaError, kErr, kCause, "nvidia-smi cannot reach GPU {pci}: {error}",
     "The driver lost this GPU (it fell off the bus, or hangs after an Xid): a rank on it hangs or fails and the "
     "others wait for it. The kernel log says why (`dmesg -T | grep -e NVRM -e Xid -e AER`); the GPU needs a reset "
     "or the node a reboot, and service if it recurs. Drain the node meanwhile.",
     "https://docs.nvidia.com/deploy/xid-errors/index.html"},
    // PCIe Advanced Error Reporting: an uncorrected error takes the device (often the GPU) off the bus;
    // corrected ones are retried by the link and only a sign of a marginal link.
    {"pcie_aer_uncorrected",
     R"((?P<port>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)?:? ?PCIe Bus Error: severity=(?P<severity>Uncorrect(?:ed|able)[^,]*), type=(?P<type>[^,\n]+))",
     codes::kCudaError, kErr, kCause, "PCIe: an uncorrected {type} error at {port} ({severity})",
     "A PCIe link failed in a way it could not correct: the device behind that port (often a GPU or a NIC) is gone or "
     "was reset, and the ranks using it hang or fail. Reseat or replace the card, riser or cable, check power and "
     "cooling, and drain the node until then (`lspci -tv` maps the port to its device).",
     "https://docs.kernel.org/PCI/pcieaer-howto.html"},
    {"pcie_aer_corrected",
     R"((?P<port>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d)?:? ?PCIe Bus Error: severity=Correct(?:ed|able), type=(?P<type>[^,\n]+))",
     codes::kCudaError, kWarn, kCause, "PCIe: corrected {type} errors at {port}",
     "The link retried and recovered, so these alone harm nothing; many of them (a storm) mean a marginal link "
     "(a riser, a cable, a slot) that may fail outright: with a GPU lost or an Xid on the same node, this port is "
     "where to look (`lspci -tv` maps it to its device).",
     "https://docs.kernel.org/PCI/pcieaer-howto.html"},
    {"cuda_ecc", R"((?:uncorrectable ECC error|ECC error encountered))", codes::kCudaError, kErr, kCause,
     "CUDA: uncorrectable ECC error on the GPU",
     "A hardware memory error: drain this node and have the GPU checked (`nvidia-smi -q -d ECC`, kernel log Xid "
     "48/63/64).",
     CUDA_ERR},
    {"cuda_driver_mismatch",
     R"((?:CUDA driver version is insufficient for CUDA runtime version|no kernel image is available for execution on the device|no CUDA-capable device is detected))",
     codes::kCudaError, kErr, kCause, "CUDA: the driver, the GPU and the build do not fit",
     "The node's driver is older than the CUDA the program was built for, the build lacks this GPU's architecture, or "
     "no "
     "GPU is visible (CUDA_VISIBLE_DEVICES, container --gpus): compare `nvidia-smi` and torch.version.cuda across "
     "nodes.",
     CUDA_ERR},
    {"cuda_error", R"(CUDA error: (?P<message>.+))", codes::kCudaError, kErr, kCause, "CUDA error: {message}",
     "A CUDA call failed: rerun with CUDA_LAUNCH_BLOCKING=1 to see which operation.", CUDA_ERR},
    {"kernel_oom_kill", R"(Out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]+)\))", codes::kOutOfMemory,
     kErr, kCause, "the kernel's OOM killer ended {comm} (pid {pid})",
     "The node ran out of host memory: lower data-loader workers or prefetch, pin_memory, CPU offload or the number of "
     "ranks per node, or request more memory from the scheduler.",
     ""},
    {"shell_killed", R"(^(?:Killed|/bin/(?:ba)?sh: line \d+: +\d+ Killed .*)\s*$)", codes::kOutOfMemory, kErr, kCause,
     "the process was killed (SIGKILL), most likely by the host's OOM killer",
     "A bare `Killed` is the shell reporting SIGKILL: usually the kernel's OOM killer (check `dmesg | grep -i oom` or "
     "the "
     "scheduler's memory accounting on that node), else a time/memory limit. Lower host memory use (data-loader "
     "workers, "
     "dataset in RAM, CPU offload) or ask for more memory.",
     ""},
    {"python_memory_error", R"(^MemoryError\b)", codes::kOutOfMemory, kErr, kCause, "Python ran out of host memory",
     "The process could not allocate host memory: lower data-loader workers/prefetch or the dataset held in RAM.", ""},
    // UCX's signal handler (Open MPI's pml ucx, NCCL's UCX plugin, HPC-X): "[host:pid :0:tid] Caught signal 7
    // (Bus error: nonexistent physical address)", then its backtrace.
    {"ucx_caught_signal",
     R"((?:\[(?P<self_host>[\w.-]+):(?P<self_pid>\d+) *:\d+:\d+\] +)?Caught signal (?P<signal>\d+) \((?P<what>[^):\n]+))",
     codes::kLogError, kErr, kCause, "the process died of signal {signal} ({what})",
     "{meaning} The backtrace after this line says where (ncclGroupEnd or a proxy thread: inside NCCL).", ""},
    {"bus_error", R"((?:Bus error|bus error encountered in worker|\bSIGBUS\b))", codes::kLogError, kErr, kCause,
     "the process died of a bus error (SIGBUS)",
     "In a training job nearly always a full /dev/shm: containers get 64 MiB unless run with --shm-size=16g or more "
     "or --ipc=host (Kubernetes: an emptyDir of medium Memory at /dev/shm); NCCL's shared-memory transport and "
     "DataLoader workers map files there (`df -h /dev/shm`). NCCL_SHM_DISABLE=1 confirms it, at a cost.",
     NCCL_TROUBLE},
    {"crash", R"((?:Segmentation fault|Fatal Python error|\*\*\* SIGSEGV|signal 11 \(SIGSEGV\)))", codes::kLogError,
     kErr, kCause, "the process crashed in native code",
     "The stack in the log (or a core dump, or `py-spy dump --native`) says where; mismatched CUDA/NCCL/PyTorch builds "
     "across "
     "nodes and a full /dev/shm are common causes.",
     ""},
    {"no_space_left", R"((?:No space left on device|\bENOSPC\b|Disk quota exceeded))", codes::kLogError, kErr, kCause,
     "a file system is full",
     "A write failed for lack of space (checkpoints, /dev/shm, /tmp or the log dir): free space or point the output "
     "elsewhere; a checkpoint written at that moment is incomplete.",
     ""},
    // Last: a PyTorch error or warning line of its C++ logging ("[E1207 10:11:12.123456789
    // ProcessGroupNCCL.cpp:1234] …", 1.x "[W socket.cpp:663] …") or of torch.distributed's Python
    // logging (2.x "E1207 10:11:12.123000 4242 torch/distributed/…/api.py:869] …", 1.x
    // "ERROR:torch.distributed.elastic…:…"); XLA's glog lines (JAX's coordination service) have the
    // same form (its fatal ones: xla_fatal_line). Context: the message is looked up among the formats PyTorch
    // (then XLA) prints (source_formats.h), and only a known error format becomes an event.
    {"torch_log_error",
     R"(^(?:\[[EW](?:\d{4} [\d:.]+)? +(?:\d+ )?[\w./-]+:\d+\]|[EW]\d{4} [\d:.]+ +\d+ [\w./-]+:\d+\]|(?:ERROR|WARNING):torch\.distributed[\w.]*:) ?(?P<message>.+))",
     codes::kLogError, kInfo, kContext, "PyTorch log line: {message}", "", TORCH_DIST},
    // After torch_log_error: c10d's "[W socket.cpp] The IPv6 network addresses of (host, port) cannot be
    // retrieved (gai error: -2 - Name or service not known)" is a harmless warning.
    // getaddrinfo's failures where the job dials: a host name (MASTER_ADDR, a hostfile's node, a peer's
    // advertised name) that does not resolve where the rank runs. Not the bare words: an offline
    // Hugging Face Hub or wandb retry says "Temporary failure in name resolution" harmlessly.
    {"name_resolution_failed",
     R"((?:socket\.gaierror|gaierror: \[Errno -?\d+\]|host not found: (?:Temporary failure in name resolution|Name or service not known)|getaddrinfo(?: failed|\(\) failed| error)))",
     codes::kRendezvousError, kErr, kCause, "a host name did not resolve",
     "A name the job dials (MASTER_ADDR, a hostfile's node, the rendezvous endpoint, a peer's host name) has no "
     "address where this rank runs: the node's DNS or /etc/hosts lacks it, the container has its own resolver, or "
     "under Kubernetes the headless service has no address until the pod is ready. Use a name every node resolves "
     "(`getent hosts NAME` on each) or the IP address itself.",
     ""},
    // XLA's fatal glog lines (JAX's coordination service ending the process: "F1207 10:11:12.123456 4242
    // client.h:82] Terminating process because …"): looked up like torch_log_error's. Apart from it, with
    // the file's extension as a literal: a class of three first letters slows the pre-scanner by a fifth.
    {"xla_fatal_line", R"(^F\d{4} [\d:.]+ +\d+ [\w./-]+\.(?:cc|h):\d+\] ?(?P<message>.+))", codes::kLogError, kInfo,
     kContext, "XLA fatal log line: {message}", "", "https://jax.readthedocs.io/en/latest/multi_process.html"},
    // srun's and slurmstepd's lines ("srun: error: …", "slurmstepd: error: …", "slurmstepd-gpu3: error: …",
    // srun's notices "srun: Job step aborted …"): looked up among the formats they print
    // (source_formats.h), like torch_log_error; a line of no known error format is no event.
    {"slurm_log_line", R"(^(?:srun|slurmstepd)(?:-[\w.-]+)?: (?:(?:error|fatal): )?(?P<message>.+))",
     codes::kLaunchError, kInfo, kContext, "Slurm: {message}", "", "https://slurm.schedmd.com/srun.html"},
    // Kubernetes, as `kubectl describe pod` shows a pod: its events ("  Warning  BackOff  3m (x5 over 10m)
    // kubelet  Back-off restarting failed container …"), `kubectl get events` rows, and a container's
    // termination reason ("      Reason:       OOMKilled"). Looked up among the messages the kubelet, the
    // scheduler and the training operator print (source_formats.h).
    {"k8s_event",
     R"(^[ \t]*(?:Warning|Normal)[ \t]+(?P<reason>[A-Z][A-Za-z]+)[ \t]+(?:<unknown>|<invalid>|\d+[smhd][\dsmhd]*(?: \(x\d+ over \d+[smhd][\dsmhd]*\))?)[ \t]+(?P<from>[a-z][\w.-]*(?:, [\w.-]+)?)[ \t]+(?P<message>\S.*))", codes::kLaunchError,
     kInfo, kContext, "Kubernetes event {reason}: {message}", "",
     "https://kubernetes.io/docs/tasks/debug/debug-application/debug-pods/"},
    {"k8s_get_events",
     R"(^[ \t]*(?:<unknown>|\d+[smhd][\dsmhd]*)[ \t]+(?:Warning|Normal)[ \t]+(?P<reason>[A-Z][A-Za-z]+)[ \t]+(?P<object>[a-z]+/[\w.-]+)[ \t]+(?P<message>\S.*))",
     codes::kLaunchError, kInfo, kContext, "Kubernetes event {reason} of {object}: {message}", "",
     "https://kubernetes.io/docs/reference/kubectl/generated/kubectl_events/"},
    {"k8s_reason", R"(^[ \t]+Reason:[ \t]+(?P<message>[A-Z][\w-]+)[ \t]*$)", codes::kLaunchError, kInfo, kContext,
     "Kubernetes: a container's state {message}", "",
     "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#container-state-terminated"},
    // DeepSpeed's logger ("[2026-12-07 10:11:12,123] [ERROR] [runner.py:512:main] …"): looked up among the
    // formats DeepSpeed's launcher and comm layer print, like torch_log_error.
    {"ds_log_line",
     R"(^(?:\[\d{4}-\d\d-\d\d [\d:,.]+\] )?\[(?:ERROR|WARNING|CRITICAL)\] \[[\w.]+:\d+:\w+\] (?P<message>.+))",
     codes::kLogError, kInfo, kContext, "DeepSpeed log line: {message}", "", DS_LAUNCH},
};

// RE2 options for the catalogue: linear time, bounded memory, no failure on long inputs.
RE2::Options PatternOptions() {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(64 << 20);
  return o;
}

}  // namespace

const std::vector<LogPattern>& Catalogue() { return kCatalogue; }

std::string PatternMatch::Fill(std::string_view t) const {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '{') {
      size_t close = t.find('}', i);
      if (close != std::string_view::npos) {
        out += Field(std::string(t.substr(i + 1, close - i - 1)).c_str());
        i = close;
        continue;
      }
    }
    out += t[i];
  }
  // A field at the end that was not there ("… follow it. {meaning}", "… failed: {error}") leaves no blank
  // and no colon.
  while (!out.empty() && (out.back() == ' ' || out.back() == ':')) out.pop_back();
  return out;
}

std::string CatalogueMarkdown() {
  auto cell = [](std::string_view text) {
    std::string out;
    for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  auto role = [](LogRole r) {
    switch (r) {
      case LogRole::kCause:
        return "cause";
      case LogRole::kConsequence:
        return "consequence";
      case LogRole::kExit:
        return "exit";
      case LogRole::kContext:
        return "context";
    }
    return "";
  };
  std::string md =
      "# Log pattern catalogue\n\n"
      "Generated from collectors/log_catalogue.cc by `dsdoctor analyze --list-patterns`; a test keeps this file equal\n"
      "to it. Entries are tried in this order and the first that matches a line wins. The expression is RE2\n"
      "syntax, matched anywhere in the line after its launcher prefixes (docs/run.md, \"Analyzing log files\");\n"
      "its named groups are the fields. Roles: a *cause* can be the root of a failure, a *consequence* usually\n"
      "follows another rank's failure, an *exit* line reports how a rank ended, *context* gives facts only.\n"
      "Each entry's test line, in the format of the public report cited beside it, is in\n"
      "collectors/log_catalogue_examples.cc (`dsdoctor analyze --explain KIND` shows them). Lines these entries\n"
      "read only generically (and Slurm's lines, Open MPI's help texts, XLA's logs, Kubernetes' events) are looked up\n"
      "among the error formats the sources print (docs/log-coverage.md).\n\n"
      "| kind | code | role | pattern | cause and remedy | documentation |\n|---|---|---|---|---|---|\n";
  for (const LogPattern& p : kCatalogue) {
    std::string refs;
    for (std::string_view r = p.refs; !r.empty();) {
      size_t sp = r.find(' ');
      std::string_view one = r.substr(0, sp);
      if (!one.empty()) refs += (refs.empty() ? "" : " ") + std::string("<") + std::string(one) + ">";
      if (sp == std::string_view::npos) break;
      r.remove_prefix(sp + 1);
    }
    std::string what = std::string(p.summary) + (*p.remedy ? std::string(". ") + p.remedy : std::string());
    md += "| " + std::string(p.kind) + " | " + p.code + (p.severity == Severity::kWarning ? " (warning)" : "") + " | " +
          role(p.role) + " | `" + cell(p.regex) + "` | " + cell(what) + " | " + refs + " |\n";
  }
  return md;
}

std::string TriggerOf(const char* regex) {
  std::string r(regex);
  // Named groups become plain ones (the pre-scanner need not capture).
  for (size_t p; (p = r.find("(?P<")) != std::string::npos;) {
    size_t close = r.find('>', p);
    r.replace(p, close - p + 1, "(?:");
  }
  if (!r.empty() && r[0] == '^') r.erase(0, 1);
  if (r.size() >= 4 && r.compare(r.size() - 4, 4, "\\s*$") == 0)
    r.erase(r.size() - 4);
  else if (!r.empty() && r.back() == '$' && (r.size() < 2 || r[r.size() - 2] != '\\'))
    r.pop_back();
  // "(^…\s*$)" forms: anchors inside the outer group.
  if (r.rfind("(^", 0) == 0) r.erase(1, 1);
  if (size_t p = r.rfind("\\s*$)"); p != std::string::npos && p + 5 == r.size()) r.erase(p, 4);
  return r;
}

struct LogPatternSet::Impl {
  const std::vector<LogPattern>* patterns;
  std::unique_ptr<RE2::Set> set;
  std::vector<std::unique_ptr<RE2>> each;
};

LogPatternSet::LogPatternSet() : LogPatternSet(kCatalogue) {}

LogPatternSet::LogPatternSet(const std::vector<LogPattern>& patterns) : impl_(std::make_unique<Impl>()) {
  impl_->patterns = &patterns;
  impl_->set = std::make_unique<RE2::Set>(PatternOptions(), RE2::UNANCHORED);
  for (const LogPattern& p : patterns) {
    std::string error;
    if (impl_->set->Add(p.regex, &error) < 0) {
      std::fprintf(stderr, "log catalogue: entry %s: %s\n", p.kind, error.c_str());
      std::abort();
    }
    impl_->each.push_back(std::make_unique<RE2>(p.regex, PatternOptions()));
  }
  if (!impl_->set->Compile()) {
    std::fprintf(stderr, "log catalogue: cannot compile the set\n");
    std::abort();
  }
}

LogPatternSet::~LogPatternSet() = default;

std::vector<const LogPattern*> LogPatternSet::MatchAll(std::string_view message) const {
  std::vector<int> hits;
  std::vector<const LogPattern*> out;
  if (!impl_->set->Match(re2::StringPiece(message.data(), message.size()), &hits)) return out;
  std::sort(hits.begin(), hits.end());
  for (int i : hits) out.push_back(&(*impl_->patterns)[i]);
  return out;
}

bool LogPatternSet::Match(std::string_view message, PatternMatch* out) const {
  std::vector<int> hits;
  re2::StringPiece text(message.data(), message.size());
  if (!impl_->set->Match(text, &hits) || hits.empty()) return false;
  int first = *std::min_element(hits.begin(), hits.end());
  const RE2& re = *impl_->each[first];
  int groups = re.NumberOfCapturingGroups();
  std::vector<re2::StringPiece> sub(groups + 1);
  out->pattern = &(*impl_->patterns)[first];
  out->fields.clear();
  if (!re.Match(text, 0, text.size(), RE2::UNANCHORED, sub.data(), groups + 1)) return true;  // the set said so
  for (const auto& [name, index] : re.NamedCapturingGroups())
    if (sub[index].data() && !sub[index].empty())
      out->fields[name] = std::string(sub[index].data(), std::min<size_t>(sub[index].size(), 300));
  // How the process ended, in words a remedy can quote ({meaning}).
  const auto number = [&](const char* name) {
    auto it = out->fields.find(name);
    return it == out->fields.end() || it->second.size() > 9 ? 0 : std::atoi(it->second.c_str());
  };
  if (out->fields.count("exit_code") || out->fields.count("signal"))
    out->fields["meaning"] = ExitMeaning(number("exit_code"), number("signal"));
  return true;
}

std::string ExitMeaning(int exit_code, int signal) {
  // Why each signal ends a training process, most likely first.
  static const std::map<int, const char*> kSignals = {
      {1, "SIGHUP: its terminal or ssh session closed (run the job under nohup, tmux or the scheduler)"},
      {2, "SIGINT: an interrupt (Ctrl-C, or a launcher passing one on)"},
      {4, "SIGILL: an illegal instruction, a binary or extension built for another CPU (or GPU) than this node's"},
      {6,
       "SIGABRT: an abort, an uncaught C++ exception or a failed check (PyTorch's NCCL watchdog aborts after a "
       "timeout); the lines just before it say which"},
      {7,
       "SIGBUS: a bus error, in a training job nearly always a full /dev/shm (containers get 64 MiB unless run "
       "with --shm-size or --ipc=host; NCCL's shared-memory transport and DataLoader workers map files there: "
       "`df -h /dev/shm`)"},
      {8,
       "SIGFPE: an arithmetic fault in native code (an integer division by zero, often a kernel or library given "
       "an empty tensor or a zero size); the stack says where"},
      {9,
       "SIGKILL: most often the kernel's OOM killer (`dmesg -T | grep -i oom` on that node, or the scheduler's "
       "memory accounting), else a scheduler's memory or time limit, or a launcher killing the rest after another "
       "rank failed"},
      {11,
       "SIGSEGV: a crash in native code; its stack (a core dump, faulthandler, `py-spy dump --native`) says "
       "where. Mismatched CUDA/NCCL/PyTorch builds across nodes, and kernels not built for this GPU, are common "
       "causes"},
      {13, "SIGPIPE: it wrote to a connection its peer had closed, a consequence of that peer ending first"},
      {15,
       "SIGTERM: it was asked to stop, by a launcher after another rank failed, a scheduler's time limit or "
       "preemption, or a person"},
      {20, "SIGTSTP: it was suspended from its terminal (Ctrl-Z); resume it with `fg`, or run the job detached"},
      {24, "SIGXCPU: it ran past its CPU-time limit (`ulimit -t`, the scheduler's)"},
      {25, "SIGXFSZ: it wrote past its file-size limit (`ulimit -f`)"},
  };
  const auto of_signal = [&](int s) {
    auto it = kSignals.find(s);
    return it != kSignals.end() ? std::string(it->second) : "signal " + std::to_string(s);
  };
  if (signal > 0) return "Signal " + std::to_string(signal) + " is " + of_signal(signal) + ".";
  if (exit_code < 0) return "Exit code " + std::to_string(exit_code) + " is " + of_signal(-exit_code) + ".";
  if (exit_code > 128 && exit_code < 160)
    return "Exit code " + std::to_string(exit_code) + " is 128 + " + std::to_string(exit_code - 128) +
           " (how shells and containers report a death by signal), " + of_signal(exit_code - 128) + ".";
  if (exit_code == 1)
    return "Exit code 1 is the program failing on its own, most often a Python exception: the traceback above it "
           "says which.";
  if (exit_code == 2)
    return "Exit code 2 is most often the command line (an argument the script's parser refused) or a missing "
           "file.";
  if (exit_code == 0) return "Exit code 0 is a normal end: the process left while the others still expected it.";
  return "Exit code " + std::to_string(exit_code) + " is the program's own: its last lines say why.";
}

const LogPatternSet& LogPatternSet::Default() {
  static const LogPatternSet* set = new LogPatternSet();
  return *set;
}

}  // namespace dsd::collectors
