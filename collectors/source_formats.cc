#include "collectors/source_formats.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "collectors/log_catalogue.h"
#include "collectors/log_classifier.h"
#include "common/strings.h"

namespace dsd::collectors {

// The tables as text, compiled in by CMake from collectors/sources/*.tsv (source_formats_data.cc).
extern const char kNcclFormatsTsv[];
extern const char kTorchFormatsTsv[];
extern const char kDeepSpeedFormatsTsv[];
extern const char kCudaErrorsTsv[];
extern const char kSlurmFormatsTsv[];
extern const char kOpenMpiHelpTsv[];
extern const char kPrrteHelpTsv[];
extern const char kJaxFormatsTsv[];
extern const char kKubernetesFormatsTsv[];

namespace {
namespace codes = diagnosis::codes;

#define NCCL_ENV_DOC "docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"

// NCCL's subsystems, by the files that print their WARN lines. The causes and remedies are the
// ones NCCL's troubleshooting guide and env documentation give for that subsystem.
const std::vector<FormatFamily> kNcclFamilies = {
    {"nccl_src_ib_failover", "src/transport/net_ib/p2p_resiliency", codes::kNcclError,
     "NCCL's InfiniBand failover: a NIC or port failed during traffic and NCCL moved (or could not move) its "
     "connections to another one",
     "A port or cable of the named NIC failed: check it (`ibstat`, link flaps in `dmesg`, the switch port's "
     "counters) on this node and its peer, and take the node out of service if the link keeps dropping."},
    {"nccl_src_gin", "src/transport/net_ib/gdaki/", codes::kNcclError,
     "NCCL's GPU-initiated networking (GIN/GDAKI) could not set up or run",
     "GPU-initiated networking needs a recent driver, NIC firmware and GPUDirect RDMA (nvidia-peermem or dma-buf) on "
     "every node: update them, or leave the device API's network features off for this job."},
    {"nccl_src_gin", "src/transport/net_ib/gin", codes::kNcclError, "", ""},
    {"nccl_src_gin", "src/gin/", codes::kNcclError, "", ""},
    {"nccl_src_ib", "src/transport/net_ib/", codes::kNcclError,
     "NCCL's InfiniBand/RoCE transport failed (verbs: device, port, queue pair or memory registration)",
     "Check the HCAs on this node and its peer: ports Active (`ibstat`, `ibv_devinfo`), NCCL_IB_HCA naming ports "
     "that exist and are up, on RoCE the GID index (NCCL_IB_GID_INDEX, `show_gids`), `ulimit -l unlimited` for "
     "memory registration, and nvidia-peermem for GPU buffers. NCCL_IB_DISABLE=1 confirms (slowly) that IB is the "
     "cause."},
    {"nccl_src_ib", "src/misc/ibv", codes::kNcclError, "", ""},
    {"nccl_src_ib", "src/include/ibvwrap", codes::kNcclError, "", ""},
    {"nccl_src_ib", "src/misc/mlx5dv", codes::kNcclError, "", ""},
    {"nccl_src_socket", "src/misc/socket.cc", codes::kNcclError,
     "NCCL's TCP sockets failed (connect, accept, send or receive between two nodes)",
     "The named peer could not be reached or dropped the connection: a firewall between the nodes (NCCL uses "
     "random high ports unless NCCL_PORT_RANGE is set), NCCL_SOCKET_IFNAME choosing an interface the peer cannot "
     "reach (docker0, a NAT or link-local address), or the peer process died first (its own log says why). "
     "`dsdoctor check` tells a DROP, a REJECT and no route apart."},
    {"nccl_src_socket", "src/transport/net_socket", codes::kNcclError, "", ""},
    {"nccl_src_bootstrap", "src/bootstrap.cc", codes::kNcclError,
     "NCCL's bootstrap (the ranks exchanging addresses through the root rank's unique id) failed",
     "Every rank must reach the root's bootstrap address: the same NCCL_SOCKET_IFNAME on every node naming an "
     "interface that routes between them, no firewall on the root's port, and the root rank (rank 0) alive until "
     "every rank joined; ranks of two jobs must not share a unique id or MASTER_PORT."},
    {"nccl_src_proxy", "src/proxy.cc", codes::kNcclError,
     "NCCL's proxy thread (which drives network and shared-memory transfers for a rank) failed or lost a peer's "
     "proxy",
     "Usually a consequence: a peer rank died or hung first and its proxy stopped answering (find the first rank "
     "that failed); otherwise the proxy's own resources failed (shared memory, file descriptors: `ulimit -n`)."},
    {"nccl_src_plugin", "src/plugin/", codes::kNcclError,
     "NCCL could not load or use a network plugin (libnccl-net, the RMA or GIN plugin)",
     "NCCL_NET_PLUGIN names a plugin that is missing, not on LD_LIBRARY_PATH, or built for another NCCL version: "
     "install the plugin that matches this NCCL (aws-ofi-nccl, nccl-rdma-sharp-plugins …) on every node, or unset "
     "NCCL_NET_PLUGIN to use NCCL's own transports."},
    {"nccl_src_collnet", "src/transport/coll_net", codes::kNcclError,
     "NCCL's CollNet (in-network reduction, e.g. SHARP) could not set up or run",
     "The SHARP plugin or aggregation manager is missing or failing on some nodes: NCCL_COLLNET_ENABLE=0 confirms; "
     "check the SHARP daemons and that every node has the same plugin."},
    {"nccl_src_nvls", "src/transport/nvls", codes::kNcclError,
     "NVLink SHARP (NVLS) or multi-node NVLink could not set up multicast memory",
     "NVLS needs NVSwitch systems with the fabric manager running (and IMEX on multi-node NVLink), enough GPU "
     "memory for its buffers, and the same driver on every node: check `nvidia-smi -q` fabric state and the fabric "
     "manager's log; NCCL_NVLS_ENABLE=0 (or NCCL_MNNVL_ENABLE=0) confirms and works around it."},
    {"nccl_src_nvls", "src/mnnvl", codes::kNcclError, "", ""},
    {"nccl_src_p2p", "src/transport/p2p", codes::kNcclError,
     "NCCL's GPU peer-to-peer transport (CUDA IPC, cuMem handles between the ranks of one node) failed",
     "The GPUs of one node cannot map each other's memory: PCIe ACS or an IOMMU blocking peer-to-peer (disable ACS "
     "in the BIOS or on the switches, `nvidia-smi topo -p2p r`), ranks in containers that do not share the IPC "
     "namespace or /dev (--ipc=host), or a virtual machine without P2P. NCCL_P2P_DISABLE=1 confirms."},
    {"nccl_src_p2p", "src/os/linux_ipcsocket", codes::kNcclError, "", ""},
    {"nccl_src_p2p", "src/os/linux_socket_pair", codes::kNcclError, "", ""},
    {"nccl_src_shm", "src/transport/shm", codes::kNcclError,
     "NCCL's shared-memory transport between the ranks of one node failed",
     "/dev/shm is too small or not shared between the ranks (containers: --shm-size=1g or --ipc=host); "
     "NCCL_SHM_DISABLE=1 works around it."},
    {"nccl_src_topology", "src/graph/", codes::kNcclError,
     "NCCL's topology detection or graph search failed (PCI/NVLink/NIC layout, XML topology files)",
     "NCCL could not read or trust the machine's topology: mount the host's /sys in containers, remove a stray "
     "NCCL_TOPO_FILE/NCCL_GRAPH_FILE (also in /etc/nccl.conf) describing another machine, or give the right one for "
     "this VM type; CUDA_VISIBLE_DEVICES and NCCL_IB_HCA must name devices that exist."},
    {"nccl_src_gdrcopy", "src/misc/gdrwrap", codes::kNcclError, "NCCL's GDRCopy (CPU mapping of GPU memory) failed",
     "The gdrdrv kernel module is missing or does not match "
     "libgdrapi: load it on every node, or set NCCL_GDRCOPY_ENABLE=0."},
    {"nccl_src_gdrcopy", "src/include/gdrwrap", codes::kNcclError, "", ""},
    {"nccl_src_cuda", "src/misc/cudawrap", codes::kCudaError, "a CUDA driver or runtime call inside NCCL failed",
     "The CUDA error named is the cause: a driver older than the CUDA that NCCL was built for (`nvidia-smi` against "
     "the torch/NCCL CUDA version), a GPU in a bad state (an Xid in `dmesg`), or GPU memory exhausted by the "
     "program; it can also be an earlier asynchronous error of the program's own kernels (CUDA_LAUNCH_BLOCKING=1 "
     "shows which)."},
    {"nccl_src_cuda", "src/include/cudawrap", codes::kCudaError, "", ""},
    {"nccl_src_cuda", "src/misc/strongstream", codes::kCudaError, "", ""},
    {"nccl_src_cuda", "src/include/checks.h", codes::kCudaError, "", ""},
    {"nccl_src_nvml", "src/misc/nvmlwrap", codes::kNcclError, "NCCL's NVML calls failed (GPU and NVLink discovery)",
     "NVML and the driver disagree (a driver update without a reboot: `nvidia-smi` fails with \"Driver/library "
     "version mismatch\" too) or the container lacks the driver's libnvidia-ml: reboot or mount the host's driver "
     "libraries."},
    {"nccl_src_memory", "src/mem_manager", codes::kNcclError,
     "NCCL could not allocate, map or register memory for its buffers",
     "GPU memory is exhausted (the program holds it: leave room for NCCL, lower NCCL_BUFFSIZE or the number of "
     "communicators), host memory registration is limited (`ulimit -l unlimited`), or the driver lacks cuMem "
     "support (NCCL_CUMEM_ENABLE=0 confirms)."},
    {"nccl_src_memory", "src/allocator", codes::kNcclError, "", ""},
    {"nccl_src_memory", "src/include/alloc.h", codes::kNcclError, "", ""},
    {"nccl_src_memory", "src/register/", codes::kNcclError, "", ""},
    {"nccl_src_memory", "src/dev_runtime_segments", codes::kNcclError, "", ""},
    {"nccl_src_usage", "src/misc/argcheck", codes::kNcclError,
     "NCCL rejected a call's arguments or its order (a null or foreign buffer, a root out of range, a type or "
     "reduce op it does not know, a group used wrongly)",
     "A bug in the calling program or framework, not the cluster: the message names the argument. Ranks built "
     "against different NCCL or framework versions cause it too; make them identical on every node."},
    {"nccl_src_usage", "src/enqueue", codes::kNcclError, "", ""},
    {"nccl_src_usage", "src/group", codes::kNcclError, "", ""},
    {"nccl_src_usage", "src/ce_coll", codes::kNcclError, "", ""},
    {"nccl_src_usage", "src/scheduler/", codes::kNcclError, "", ""},
    {"nccl_src_rma", "src/rma/", codes::kNcclError,
     "NCCL's one-sided (RMA) or device-initiated communication could not run",
     "These features need a recent driver (CUDA 12.5+ for one-sided RMA), symmetric memory windows registered on "
     "every rank, and NVLink or a GIN-capable network: update the driver, or use the regular collectives."},
    {"nccl_src_rma", "src/dev_runtime", codes::kNcclError, "", ""},
    {"nccl_src_rma", "src/devcomm/", codes::kNcclError, "", ""},
    {"nccl_src_init", "src/init.cc", codes::kNcclError,
     "NCCL could not create or tear down a communicator: the ranks disagree (NCCL versions, device counts, two "
     "ranks on one GPU) or its configuration is invalid",
     "Make every node identical (one NCCL version: `dsdoctor check`; the same NICs and GPUs visible), give each rank "
     "its own GPU (torch.cuda.set_device(LOCAL_RANK)), and check the NCCL_* settings the message names."},
    {"nccl_src_init", "src/transport.cc", codes::kNcclError, "", ""},
    {"nccl_src_init", "src/transport/net.cc", codes::kNcclError, "", ""},
    {"nccl_src_ras", "src/ras/", codes::kNcclError,
     "NCCL's RAS service (the reliability and status monitor between ranks) failed",
     "RAS uses its own TCP connections between the nodes: the same firewall and NCCL_SOCKET_IFNAME rules apply; "
     "NCCL_RAS_ENABLE=0 turns it off without affecting training."},
    {"nccl_src_os", "src/os/linux", codes::kNcclError,
     "an operating-system call inside NCCL failed (files, /proc and /sys, CPU affinity, environment)",
     "The message names the call and errno: limits (`ulimit -n`, `ulimit -l`), a container missing /proc or /sys "
     "entries, or a malformed NCCL_* variable."},
    {"nccl_src_os", "src/misc/utils", codes::kNcclError, "", ""},
    {"nccl_src_os", "src/include/utils.h", codes::kNcclError, "", ""},
    {"nccl_src_os", "src/param/", codes::kNcclError, "", ""},
    {"nccl_src_os", "src/include/param/", codes::kNcclError, "", ""},
    // Printed by NCCL's Windows build only: never in a Linux job's log (left out of the coverage).
    {"nccl_src_windows", "src/os/windows", codes::kNcclError, "", ""},
    {"nccl_src_other", "", codes::kNcclError, "NCCL reported an error", "", /*generic=*/true},
};

// PyTorch's distributed subsystems, by the files that raise or log their messages.
const std::vector<FormatFamily> kTorchFamilies = {
    {"torch_src_store", "torch/csrc/distributed/c10d/TCPStore", codes::kRendezvousError,
     "PyTorch's c10d store (the TCPStore at MASTER_ADDR:MASTER_PORT every rank meets at) failed",
     "Every rank must reach MASTER_ADDR:MASTER_PORT: the master (rank 0's node) started and listening, the port free "
     "(no second job or stale process on it), no firewall, MASTER_ADDR resolving to the same address everywhere; a "
     "timeout means some rank arrived late or never (its own log says why)."},
    {"torch_src_store", "torch/csrc/distributed/c10d/FileStore", codes::kRendezvousError, "", ""},
    {"torch_src_store", "torch/csrc/distributed/c10d/HashStore", codes::kRendezvousError, "", ""},
    {"torch_src_store", "torch/csrc/distributed/c10d/PrefixStore", codes::kRendezvousError, "", ""},
    {"torch_src_store", "torch/csrc/distributed/c10d/Store", codes::kRendezvousError, "", ""},
    {"torch_src_store", "torch/csrc/distributed/c10d/socket", codes::kRendezvousError, "", ""},
    {"torch_src_store", "torch/csrc/distributed/c10d/control_collectives/", codes::kRendezvousError, "", ""},
    {"torch_src_pg_nccl", "torch/csrc/distributed/c10d/ProcessGroupNCCL", codes::kNcclError,
     "PyTorch's NCCL process group failed (an NCCL error, a watchdog timeout or an aborted communicator)",
     "NCCL's own WARN lines before this one name the cause (run with NCCL_DEBUG=WARN); a timeout means another "
     "rank did not make the matching call, an abort follows another rank's failure. TORCH_NCCL_* settings named in "
     "the message change the watchdog's behaviour, not the cause."},
    {"torch_src_pg_nccl", "torch/csrc/distributed/c10d/NCCLUtils", codes::kNcclError, "", ""},
    {"torch_src_pg_gloo", "torch/csrc/distributed/c10d/ProcessGroupGloo", codes::kCommError,
     "PyTorch's Gloo process group failed (a connection, a timeout or tensors that differ between ranks)",
     "Gloo connects every pair of ranks over TCP: GLOO_SOCKET_IFNAME must name an interface that routes between the "
     "nodes, no firewall between them; tensors of one collective must have the same size and type on every rank."},
    {"torch_src_pg_gloo", "torch/csrc/distributed/c10d/GlooDeviceFactory", codes::kCommError, "", ""},
    {"torch_src_pg_mpi", "torch/csrc/distributed/c10d/ProcessGroupMPI", codes::kCommError,
     "PyTorch's MPI process group failed",
     "The MPI backend needs torch built with MPI and the job started by "
     "mpirun with MPI_THREAD_MULTIPLE support; the message names the MPI call."},
    {"torch_src_pg_ucc", "torch/csrc/distributed/c10d/ProcessGroupUCC", codes::kCommError,
     "PyTorch's UCC process group failed",
     "UCC/UCX could not set up its transports: check UCX_TLS/UCX_NET_DEVICES and "
     "that the same UCC is installed on every node."},
    {"torch_src_pg_ucc", "torch/csrc/distributed/c10d/UCCUtils", codes::kCommError, "", ""},
    {"torch_src_symm", "torch/csrc/distributed/c10d/CUDASymmetricMemory", codes::kCommError,
     "PyTorch's symmetric memory (NVLink peer and multicast mappings between the GPUs of a node) could not be set up",
     "It needs GPUs joined by NVLink (multicast: NVSwitch with the fabric manager) and a driver with cuMem and "
     "multicast support; without them, leave the features that use it (async tensor parallel, intra-node comm) "
     "off."},
    {"torch_src_symm", "torch/csrc/distributed/c10d/SymmetricMemory", codes::kCommError, "", ""},
    {"torch_src_symm", "torch/csrc/distributed/c10d/intra_node_comm", codes::kCommError, "", ""},
    {"torch_src_symm", "torch/csrc/distributed/c10d/CudaDMAConnectivity", codes::kCommError, "", ""},
    {"torch_src_symm", "torch/csrc/distributed/c10d/DMAConnectivity", codes::kCommError, "", ""},
    {"torch_src_symm", "torch/csrc/distributed/c10d/cuda/", codes::kCommError, "", ""},
    {"torch_src_ddp", "torch/csrc/distributed/c10d/reducer", codes::kLogError,
     "DistributedDataParallel's reducer found the ranks' gradients inconsistent (unused parameters, parameters "
     "that differ between ranks, a backward pass that did not finish)",
     "Every rank must build the same model and run backward over the same parameters each step: pass "
     "find_unused_parameters=True when some parameters get no gradient, make the model identical on every rank, and "
     "do not call backward twice without no_sync(); TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters."},
    {"torch_src_ddp", "torch/csrc/distributed/c10d/comm.cpp", codes::kLogError, "", ""},
    {"torch_src_ddp", "torch/csrc/distributed/c10d/default_comm_hooks", codes::kLogError, "", ""},
    {"torch_src_ddp", "torch/csrc/distributed/c10d/python_comm_hook", codes::kLogError, "", ""},
    {"torch_src_ddp", "torch/csrc/distributed/c10d/logger", codes::kLogError, "", ""},
    {"torch_src_flight_recorder", "torch/csrc/distributed/c10d/FlightRecorder", codes::kLogError,
     "PyTorch's Flight Recorder could not record or dump the collectives",
     "The dump location (TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE) must be writable on every node; "
     "the training itself is not affected."},
    {"torch_src_flight_recorder", "torch/csrc/distributed/c10d/TraceUtils", codes::kLogError, "", ""},
    {"torch_src_rendezvous", "torch/distributed/elastic/rendezvous/", codes::kRendezvousError,
     "torchrun's rendezvous (the nodes agreeing on the job's membership) failed",
     "Every node must run torchrun with the same --rdzv-endpoint (reachable from all nodes: host name resolving, "
     "port open), --rdzv-backend, --rdzv-id and --nnodes; a timeout means a node did not join in time (started "
     "late, or could not reach the endpoint)."},
    {"torch_src_rendezvous", "torch/distributed/rendezvous", codes::kRendezvousError, "", ""},
    {"torch_src_elastic", "torch/distributed/elastic/", codes::kLaunchError,
     "torchrun's elastic agent reported a worker failure or could not manage its workers",
     "The worker named (local rank, pid, exit code) failed first: its own output and the error file "
     "(TORCHELASTIC_ERROR_FILE) say why; the agent then stopped the others."},
    {"torch_src_elastic", "torch/distributed/launcher/", codes::kLaunchError, "", ""},
    {"torch_src_torchrun_args", "torch/distributed/run.py", codes::kLaunchError, "torchrun rejected its command line",
     "Fix the torchrun arguments the message names (torchrun --help); the "
     "same command must be given on every node."},
    {"torch_src_api", "torch/distributed/distributed_c10d.py", codes::kLogError,
     "torch.distributed rejected a call (a process group not initialized, a wrong group, rank, backend or tensor "
     "argument)",
     "A bug in the program's use of torch.distributed, not the cluster: call init_process_group on every rank before "
     "any collective, pass tensors on the backend's device (cuda for nccl), ranks within the group, and the same "
     "arguments on every rank; the traceback's program line is where."},
    {"torch_src_api", "torch/csrc/distributed/c10d/", codes::kLogError, "", ""},
    {"torch_src_other", "", codes::kLogError, "PyTorch raised an error", "", /*generic=*/true},
};

// Formats whose own words say more than the subsystem printing them: NCCL's internal consistency
// checks (a null handle, a state that cannot be) and settings it ignores read the same in every
// subsystem. Tried before the path families; `path` here is a phrase of the format.
const std::vector<FormatFamily> kNcclPhraseFamilies = {
    {"nccl_src_internal", "pass NULL", codes::kNcclError,
     "NCCL hit an internal consistency check (a null handle, an argument or state that cannot be)",
     "NCCL's documented cause of internal errors is a mismatch it cannot check: ranks running different NCCL "
     "versions (`dsdoctor check` compares them), collectives that differ between ranks, or the program corrupting "
     "memory NCCL owns. With identical versions everywhere, report it to NVIDIA/nccl with the NCCL_DEBUG=INFO log."},
    {"nccl_src_internal", "is NULL", codes::kNcclError, "", ""},
    {"nccl_src_internal", "Invalid argument", codes::kNcclError, "", ""},
    {"nccl_src_internal", "Unknown pattern", codes::kNcclError, "", ""},
    {"nccl_src_internal", "has bugs", codes::kNcclError, "", ""},
    {"nccl_src_internal", "wrong socket state", codes::kNcclError, "", ""},
    {"nccl_src_internal", "unexpected socket state", codes::kNcclError, "", ""},
    {"nccl_src_internal", "corrupted", codes::kNcclError, "", ""},
    {"nccl_src_setting_ignored", "being ignored", codes::kNcclError, "NCCL ignored a setting it cannot use",
     "The NCCL_* variable or communicator config value the message names is invalid here and NCCL runs without it: "
     "fix or unset it (also in /etc/nccl.conf and ~/.nccl.conf) so that every node runs the configuration you "
     "meant."},
    {"nccl_src_setting_ignored", "Ignoring", codes::kNcclError, "", ""},
    {"nccl_src_setting_ignored", ", ignoring", codes::kNcclError, "", ""},
    {"nccl_src_setting_ignored", "Unsetting", codes::kNcclError, "", ""},
};

// DeepSpeed's launcher and comm layer, by file.
const std::vector<FormatFamily> kDeepSpeedFamilies = {
    {"ds_src_hostfile", "deepspeed/launcher/runner.py", codes::kLaunchError,
     "the deepspeed launcher could not use the hostfile, the node filters or the resources they name",
     "The hostfile needs one `hostname slots=N` line per node, each host once; --include/--exclude and "
     "--num_nodes/--num_gpus must name hosts and slots it has (and not be combined); every host must be reachable by "
     "passwordless ssh from this one (`ssh HOST true`); give --master_addr when `hostname -I` has no address the "
     "other nodes can reach."},
    {"ds_src_multinode", "deepspeed/launcher/multinode_runner.py", codes::kLaunchError,
     "the deepspeed launcher's multinode backend (pdsh, OpenMPI, MPICH, Intel MPI, MVAPICH, Slurm) cannot start the "
     "job as asked",
     "That backend needs the same number of slots on every node, takes no --include/--exclude or "
     "--num_nodes/--num_gpus, and must be installed on every node (mpirun, mpiname, srun on PATH); pick the backend "
     "that matches the cluster with --launcher, or pdsh (the default)."},
    {"ds_src_launch", "deepspeed/launcher/launch", codes::kLaunchError,
     "DeepSpeed's per-node launcher (launch.py) could not start or keep its workers",
     "The launcher's arguments or environment are inconsistent (world_info, RANK/LOCAL_RANK set by another launcher, "
     "a --log_dir that is a file): start the job with the deepspeed command only, not under torchrun or mpirun as "
     "well; a worker's own output says why it exited."},
    {"ds_src_comm", "deepspeed/comm/", codes::kCommError,
     "DeepSpeed's communication layer cannot use this torch.distributed (a feature missing from this torch, or a "
     "backend that lacks it)",
     "DeepSpeed and torch versions must fit: upgrade torch (or pin DeepSpeed to a release for this torch), the same "
     "on every node."},
    {"ds_src_other", "", codes::kLogError, "DeepSpeed raised an error", "", /*generic=*/true},
};

// The CUDA runtime's errors (what "CUDA error: …" and NCCL's "Cuda failure '…'" carry), by name.
const std::vector<FormatFamily> kCudaFamilies = {
    {"cuda_src_memory", "|cudaErrorMemoryAllocation|cudaErrorLaunchOutOfResources|cudaErrorTooManyPeers|",
     codes::kOutOfMemory, "the GPU ran out of memory (or of the resources a launch or a peer mapping needs)",
     "The program holds the GPU's memory: lower the micro batch or sequence length, enable activation checkpointing or "
     "ZeRO/FSDP sharding, leave room for NCCL's buffers, and check `nvidia-smi` for another process on the same GPU "
     "(two ranks on one GPU)."},
    {"cuda_src_kernel_fault",
     "|cudaErrorIllegalAddress|cudaErrorIllegalInstruction|cudaErrorMisalignedAddress|cudaErrorInvalidAddressSpace|"
     "cudaErrorInvalidPc|cudaErrorLaunchFailure|cudaErrorPriorLaunchFailure|cudaErrorHardwareStackError|"
     "cudaErrorLaunchTimeout|cudaErrorAssert|",
     codes::kCudaError, "a GPU kernel faulted (an illegal or misaligned access, a device assert, a kernel killed)",
     "Usually the program's own bug: an index out of range (labels >= num_classes, token ids >= vocab size), a tensor "
     "on the wrong device. CUDA reports it late, so rerun with CUDA_LAUNCH_BLOCKING=1 (and compute-sanitizer) to see "
     "the kernel. On one node only, with an Xid in `dmesg` (13, 31, 43), suspect that GPU or its driver."},
    {"cuda_src_hardware",
     "|cudaErrorECCUncorrectable|cudaErrorNvlinkUncorrectable|cudaErrorContained|cudaErrorExternalDevice|",
     codes::kCudaError, "a GPU hardware error (uncorrectable ECC, NVLink, or a contained fault)",
     "Drain the node and have the GPU checked (`nvidia-smi -q -d ECC`, Xid 48/63/64/74/79 in `dmesg`); the job "
     "restarted on other nodes goes on."},
    {"cuda_src_driver",
     "|cudaErrorInsufficientDriver|cudaErrorCallRequiresNewerDriver|cudaErrorStubLibrary|"
     "cudaErrorNoKernelImageForDevice|"
     "cudaErrorInvalidKernelImage|cudaErrorInvalidSource|cudaErrorInvalidPtx|cudaErrorUnsupportedPtxVersion|"
     "cudaErrorJitCompilerNotFound|cudaErrorJitCompilationDisabled|cudaErrorSystemDriverMismatch|"
     "cudaErrorCompatNotSupportedOnDevice|cudaErrorDeviceNotLicensed|cudaErrorInitializationError|"
     "cudaErrorStartupFailure|cudaErrorNoDevice|cudaErrorInvalidDevice|cudaErrorSoftwareValidityNotEstablished|"
     "cudaErrorSystemNotReady|cudaErrorInvalidDeviceFunction|cudaErrorSharedObjectInitFailed|"
     "cudaErrorSharedObjectSymbolNotFound|cudaErrorFileNotFound|cudaErrorOperatingSystem|",
     codes::kCudaError, "the driver, the GPU and the program's CUDA build do not fit (or no GPU is visible)",
     "Compare the node's driver (`nvidia-smi`) with the CUDA the program was built for (torch.version.cuda): the "
     "driver "
     "must be as new, the build must include this GPU's architecture, and CUDA_VISIBLE_DEVICES or the container's "
     "--gpus must show the GPUs the ranks ask for (each local rank below the GPUs on its node); the same on every "
     "node. A driver updated without a reboot fails the same way (nvidia-smi: Driver/library version mismatch)."},
    {"cuda_src_busy",
     "|cudaErrorDevicesUnavailable|cudaErrorDeviceAlreadyInUse|cudaErrorSetOnActiveProcess|"
     "cudaErrorMpsConnectionFailed|"
     "cudaErrorMpsRpcFailure|cudaErrorMpsServerNotReady|cudaErrorMpsMaxClientsReached|"
     "cudaErrorMpsMaxConnectionsReached|"
     "cudaErrorMpsClientTerminated|cudaErrorCdpNotSupported|cudaErrorNotPermitted|",
     codes::kCudaError, "the GPU is busy or not available to this process (exclusive compute mode, MPS, another job)",
     "Another process holds the GPU in exclusive compute mode, or MPS refused the client: check `nvidia-smi` (compute "
     "mode, processes) on that node, give each rank its own GPU (LOCAL_RANK), and restart or drain the MPS daemon."},
    {"cuda_src_peer",
     "|cudaErrorPeerAccessUnsupported|cudaErrorPeerAccessAlreadyEnabled|cudaErrorPeerAccessNotEnabled|",
     codes::kCudaError, "GPU peer-to-peer access between two GPUs of a node failed",
     "The GPUs cannot map each other's memory: PCIe ACS or the IOMMU blocks peer-to-peer (`nvidia-smi topo -p2p r`; "
     "disable ACS), or a VM without P2P; NCCL_P2P_DISABLE=1 confirms it and works around it."},
    {"cuda_src_graph",
     "|cudaErrorStreamCaptureUnsupported|cudaErrorStreamCaptureInvalidated|cudaErrorStreamCaptureMerge|"
     "cudaErrorStreamCaptureUnmatched|cudaErrorStreamCaptureUnjoined|cudaErrorStreamCaptureIsolation|"
     "cudaErrorStreamCaptureImplicit|cudaErrorCapturedEvent|cudaErrorStreamCaptureWrongThread|"
     "cudaErrorGraphExecUpdateFailure|",
     codes::kCudaError, "a CUDA graph capture was broken (an operation not allowed while a stream captures)",
     "Something inside a captured region (torch.compile mode=\"reduce-overhead\", CUDA graphs) synchronizes, allocates "
     "or communicates outside the graph: move it out of the captured region, or turn graph capture off to confirm."},
    {"cuda_src_shutdown", "|cudaErrorCudartUnloading|cudaErrorContextIsDestroyed|", codes::kCudaError,
     "a CUDA call came while the process was tearing down",
     "Usually a consequence: the process was exiting after another failure (its first error is the cause), or a "
     "thread (a data loader, a watchdog) used CUDA after the main thread ended; destroy the process group and join "
     "threads before exit.",
     false, true},
    {"cuda_src_usage",
     "|cudaErrorInvalidValue|cudaErrorInvalidConfiguration|cudaErrorInvalidPitchValue|cudaErrorInvalidSymbol|"
     "cudaErrorInvalidHostPointer|cudaErrorInvalidDevicePointer|cudaErrorInvalidTexture|cudaErrorInvalidTextureBinding|"
     "cudaErrorInvalidChannelDescriptor|cudaErrorInvalidMemcpyDirection|cudaErrorAddressOfConstant|"
     "cudaErrorTextureFetchFailed|cudaErrorTextureNotBound|cudaErrorSynchronizationError|cudaErrorInvalidFilterSetting|"
     "cudaErrorInvalidNormSetting|cudaErrorMixedDeviceExecution|cudaErrorNotYetImplemented|"
     "cudaErrorMemoryValueTooLarge|"
     "cudaErrorInvalidSurface|cudaErrorDuplicateVariableName|cudaErrorDuplicateTextureName|"
     "cudaErrorDuplicateSurfaceName|"
     "cudaErrorIncompatibleDriverContext|cudaErrorMissingConfiguration|cudaErrorLaunchMaxDepthExceeded|"
     "cudaErrorLaunchFileScopedTex|cudaErrorLaunchFileScopedSurf|cudaErrorSyncDepthExceeded|"
     "cudaErrorLaunchPendingCountExceeded|cudaErrorDeviceUninitialized|cudaErrorMapBufferObjectFailed|"
     "cudaErrorUnmapBufferObjectFailed|cudaErrorArrayIsMapped|cudaErrorAlreadyMapped|cudaErrorAlreadyAcquired|"
     "cudaErrorNotMapped|cudaErrorNotMappedAsArray|cudaErrorNotMappedAsPointer|cudaErrorUnsupportedLimit|"
     "cudaErrorInvalidGraphicsContext|cudaErrorUnsupportedExecAffinity|cudaErrorUnsupportedDevSideSync|"
     "cudaErrorInvalidResourceHandle|cudaErrorIllegalState|cudaErrorLossyQuery|cudaErrorSymbolNotFound|"
     "cudaErrorNotReady|cudaErrorLaunchIncompatibleTexturing|cudaErrorHostMemoryAlreadyRegistered|"
     "cudaErrorHostMemoryNotRegistered|cudaErrorCooperativeLaunchTooLarge|cudaErrorTensorMemoryLeak|"
     "cudaErrorNotSupported|cudaErrorCdpVersionMismatch|cudaErrorTimeout|cudaErrorInvalidClusterSize|"
     "cudaErrorFunctionNotLoaded|cudaErrorInvalidResourceType|cudaErrorInvalidResourceConfiguration|"
     "cudaErrorProfilerDisabled|cudaErrorProfilerNotInitialized|cudaErrorProfilerAlreadyStarted|"
     "cudaErrorProfilerAlreadyStopped|",
     codes::kCudaError, "a CUDA call was made with arguments or in a state the runtime rejects",
     "A bug in the program or a library (a custom kernel's launch configuration, a stream or event used wrongly), or "
     "libraries built for different CUDA versions in one process (compare torch.version.cuda with the extensions': "
     "apex, flash-attn, DeepSpeed ops). CUDA_LAUNCH_BLOCKING=1 shows which call."},
    {"cuda_src_other", "", codes::kCudaError, "a CUDA call failed", "", /*generic=*/true},
};

#define OMPI_TROUBLE "docs.open-mpi.org/en/main/launching-apps/troubleshooting.html"

// Help texts whose words say more than the file showing them: a peer seen to go away.
const std::vector<FormatFamily> kOmpiPhraseFamilies = {
    {"ompi_src_peer_gone", "has unexpectedly disconnected", codes::kCommError,
     "a peer MPI process disconnected without MPI_Finalize: it crashed or exited first",
     "A consequence: the peer host the message names ran the process that failed first; its own output (a crash, an "
     "OOM kill, an exit) is the cause, and what this process does next (hang, crash) follows from it.",
     false, /*consequence=*/true},
};

// Open MPI's and PRRTE's help texts, by the help file's name ("help-mpi-btl-tcp.txt"): the
// subsystem that shows them.
const std::vector<FormatFamily> kOmpiFamilies = {
    {"ompi_src_tcp", "help-mpi-btl-tcp", codes::kCommError,
     "Open MPI's TCP connections failed: between ranks (the tcp BTL) or between mpirun and its daemons (the oob)",
     "A firewall between the nodes or an interface the peer cannot reach: Open MPI tries every interface it finds "
     "(docker0, virbr0, a NAT or link-local address included), so name the one the nodes share with `--mca "
     "btl_tcp_if_include IFACE --mca oob_tcp_if_include IFACE` (or a CIDR), and open the ports between the nodes "
     "(`dsdoctor check` tells a DROP, a REJECT and no route apart). A peer that hung up may simply have died: its own "
     "output says why."},
    {"ompi_src_tcp", "help-oob-", codes::kCommError, "", ""},
    {"ompi_src_tcp", "help-btl-tcp", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-mpi-btl-openib", codes::kCommError,
     "Open MPI could not use a high-performance fabric (InfiniBand/RoCE verbs, UCX, OFI/libfabric, PSM)",
     "Check the HCAs (`ibstat`, `ibv_devinfo`: ports Active), `ulimit -l unlimited` for registered memory on every "
     "node (also in the launcher's and slurmd's limits), and choose the transport explicitly: `--mca pml ucx` on "
     "UCX builds, `--mca btl ^openib` to leave the deprecated openib BTL out; `--mca btl tcp,self,vader` confirms "
     "(slowly) that the fabric is the cause."},
    {"ompi_src_fabric", "help-opal-common-verbs", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-mtl-", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-common-ofi", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-common-ucx", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-pml-ucx", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-mpi-btl-base", codes::kCommError, "", ""},
    {"ompi_src_fabric", "help-mca-bml-r2", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-btl-vader", codes::kCommError,
     "Open MPI's shared-memory transport between the ranks of one node failed (its backing file, its size, or "
     "single-copy access between processes)",
     "In a container /dev/shm is often 64 MB: run it with `--shm-size=…` or `--ipc=host`; a full /dev/shm or /tmp "
     "(stale files of killed jobs) has the same effect. Single-copy (CMA/XPMEM) needs ptrace rights between the "
     "ranks: `--mca btl_vader_single_copy_mechanism none` works without them."},
    {"ompi_src_shm", "help-mpi-btl-sm", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-btl-sm", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-mpi-common-sm", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-opal-shmem", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-mpi-coll-sm", codes::kCommError, "", ""},
    {"ompi_src_shm", "help-oshmem-sshmem", codes::kCommError, "", ""},
    {"ompi_src_placement", "help-rmaps", codes::kLaunchError,
     "mpirun could not place the processes as asked: slots, the hostfile or --host list, the mapping, ranking or "
     "binding policy",
     "Ask for no more processes than the hostfile's slots (or add --oversubscribe knowingly), name each host once "
     "with `slots=N`, and give mapping/binding options the nodes can satisfy (`--map-by ppr:N:node`, `--bind-to "
     "none` to test); `--display-map` shows what mpirun made of them."},
    {"ompi_src_placement", "help-orte-rmaps", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-prte-rmaps", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-hostfile", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-dash-host", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-bindto", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-mapby", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-rankby", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-placement", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-prte-hwloc", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-opal-hwloc", codes::kLaunchError, "", ""},
    {"ompi_src_process", "help-errmgr-", codes::kRankExited,
     "a process of the job ended (exited non-zero, was killed by a signal, aborted, or ended without MPI_Finalize) "
     "and mpirun ended the others",
     "The process the message names failed first: its own output (the lines before this message, or its rank's log) "
     "says why; the other ranks' ends are consequences."},
    {"ompi_src_process", "help-state-", codes::kRankExited, "", ""},
    {"ompi_src_process", "help-orterun", codes::kRankExited, "", ""},
    {"ompi_src_process", "help-prterun", codes::kRankExited, "", ""},
    {"ompi_src_process", "help-prun", codes::kRankExited, "", ""},
    {"ompi_src_process", "help-pterm", codes::kRankExited, "", ""},
    {"ompi_src_process", "help-prte.txt", codes::kRankExited, "", ""},
    {"ompi_src_launch", "help-plm-", codes::kLaunchError,
     "mpirun could not start or keep its daemons (orted/prted) on the nodes: the ssh/Slurm launch, the daemons' "
     "wire-up or PMIx",
     "Check passwordless ssh from the launching node to every node (`ssh HOST true`, no prompt, no banner on "
     "stdout), the same Open MPI install at the same path everywhere (`--prefix` or PATH/LD_LIBRARY_PATH in the "
     "non-interactive shell's rc file), and that the daemons can connect back to mpirun (a firewall; `--mca "
     "oob_tcp_if_include IFACE`); under Slurm, launch inside the allocation."},
    {"ompi_src_launch", "help-ess-", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-orted", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-prted", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-orte-runtime", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-prte-runtime", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-orte-odls", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-prte-odls", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-orte-filem", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-prte-filem", codes::kLaunchError, "", ""},
    {"ompi_src_placement", "help-orte-rtc", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-ras-", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-pmix-", codes::kLaunchError, "", ""},
    {"ompi_src_launch", "help-orte-server", codes::kLaunchError, "", ""},
    {"ompi_src_mpi", "help-mpi-", codes::kCommError,
     "the MPI library failed at run time: MPI_Init could not start, an MPI call returned an error (the default "
     "handler aborts the job), or the program called MPI_Abort",
     "The message names the call and the rank: a failed MPI_Init is usually the launch (run the program with "
     "mpirun/srun, not alone, with the Open MPI it was built with); an error in a call is the program's arguments "
     "or a peer that died first (its output says why)."},
    {"ompi_src_mpi", "help-mpool-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-rcache-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-osc-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-coll-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-mca-coll-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-shmem-", codes::kCommError, "", ""},
    {"ompi_src_mpi", "help-oshmem-", codes::kCommError, "", ""},
    {"ompi_src_config", "help-mca-", codes::kLaunchError,
     "Open MPI rejected a setting: an MCA parameter, component or command-line option that does not exist here or "
     "a value it cannot use",
     "Check the named parameter against `ompi_info --all` on this install (names change between releases: 4.x "
     "`btl vader` is 5.x `btl sm`), in OMPI_MCA_* variables, mca-params.conf files and the mpirun line, the same on "
     "every node."},
    {"ompi_src_config", "help-opal-", codes::kLaunchError, "", ""},
    {"ompi_src_config", "help-schizo-", codes::kLaunchError, "", ""},
    {"ompi_src_config", "help-prte-util", codes::kLaunchError, "", ""},
    {"ompi_src_config", "help-regex", codes::kLaunchError, "", ""},
    {"ompi_src_other", "", codes::kLaunchError, "Open MPI reported an error", "", /*generic=*/true},
};

// Slurm's srun and slurmstepd, by the files that print their error()/fatal() lines.
const std::vector<FormatFamily> kSlurmFamilies = {
    {"slurm_src_pmi", "src/plugins/mpi/", codes::kLaunchError,
     "Slurm's PMI/PMIx plugin (`srun --mpi=pmix`) could not wire up the step's processes: the exchange MPI and NCCL "
     "bootstrap through",
     "The MPI library must be built against a PMIx (or PMI-2) that this Slurm supports: check `srun --mpi=list`, "
     "pass the matching `--mpi=pmix_v4`/`pmi2`, and keep the PMIx versions of Slurm and the MPI compatible on every "
     "node; a timeout in the exchange means a node's slurmstepd could not reach another's (the nodes' firewall, "
     "SlurmdSpoolDir/tmp space)."},
    {"slurm_src_cgroup", "src/plugins/task/", codes::kLaunchError,
     "Slurm's task, cgroup or accounting plugin acted on the step: a memory limit (OOM), the CPU/GPU binding or "
     "device constraint, or the step's cgroup",
     "Ask for what the job uses (`--mem`, `--mem-per-gpu`, `--gpus-per-task`/`--gpu-bind`, `--cpus-per-task`): a "
     "cgroup's memory limit kills the task that exceeds it, and ConstrainDevices hides GPUs the step did not ask "
     "for. The node's slurmd log and `sacct -j JOB --format=JobID,State,MaxRSS,ReqMem` say which limit."},
    {"slurm_src_cgroup", "src/plugins/cgroup/", codes::kLaunchError, "", ""},
    {"slurm_src_cgroup", "src/plugins/proctrack/", codes::kLaunchError, "", ""},
    {"slurm_src_cgroup", "src/plugins/jobacct_gather/", codes::kLaunchError, "", ""},
    {"slurm_src_cgroup", "src/interfaces/jobacct_gather", codes::kLaunchError, "", ""},
    {"slurm_src_env", "src/common/env.c", codes::kLaunchError,
     "Slurm could not set up a task's environment (a SLURM_* variable, or one of the job's own that is too long or "
     "malformed)",
     "The environment srun passes on is too large or has a malformed entry: export less (`--export=NONE` plus what "
     "the job needs, not a whole shell's environment with huge variables), and check for variables holding whole "
     "files or lists; a SLURM_* one that cannot be set points to the node (memory, slurmd's own limits)."},
    {"slurm_src_stepd", "src/slurmd/slurmstepd/", codes::kLaunchError,
     "slurmstepd (the step's manager on a node) could not start, watch or end a task: the program's executable or "
     "working directory, the user's environment, a prolog, or the node itself",
     "The named node's slurmd log (`SlurmdLogFile`) says more; check that the program, its working directory and "
     "its files exist on every node at the same path (the job's nodes share nothing but what is mounted), and "
     "`scontrol show node NODE` for a node Slurm has drained."},
    {"slurm_src_srun", "src/srun/", codes::kLaunchError,
     "srun could not launch or keep the job step: its allocation, the requested resources, a node that failed, or "
     "the I/O connection between srun and the nodes",
     "Compare the step's request with the allocation (`scontrol show job $SLURM_JOB_ID`: nodes, tasks, GPUs), run "
     "srun inside it, and check that the compute nodes can connect back to the node srun runs on (srun listens on "
     "ephemeral ports unless SrunPortRange is set). A node failure is the cluster's: `sinfo -R`."},
    {"slurm_src_srun", "src/api/step", codes::kLaunchError, "", ""},
    {"slurm_src_srun", "src/common/io_hdr", codes::kLaunchError, "", ""},
    {"slurm_src_srun", "src/api/", codes::kLaunchError, "", ""},
    {"slurm_src_other", "", codes::kLaunchError, "Slurm reported an error", "", /*generic=*/true},
};

// JAX's words that say more than the file printing them: another task's failure seen from here, a
// task gone, a barrier some task never reached. Tried before the path families.
const std::vector<FormatFamily> kJaxPhraseFamilies = {
    {"jax_src_peer_failed", "another task died", codes::kCommError,
     "JAX's coordination service reported an error of another task (or of the service): this process is ending "
     "because of it",
     "A consequence: find the task that failed first (its own log, with `python -u` so its last lines are not lost in "
     "a buffer, or the scheduler's events for it: OOM kill, preemption, eviction); the finding naming it comes "
     "first.",
     false, /*consequence=*/true},
    {"jax_src_peer_failed", "Polled an error from coordination service", codes::kCommError, "", ""},
    {"jax_src_peer_failed", "All tasks were set to error", codes::kCommError, "", ""},
    {"jax_src_peer_failed", "Stopping coordination service", codes::kCommError, "", ""},
    {"jax_src_task_lost", "heartbeat timeout", codes::kRankMissing,
     "a JAX process stopped sending heartbeats to the coordination service (it died, hung, was preempted, or lost "
     "the network to process 0)",
     "The task the message names is the one to look at: its log's last lines and the scheduler's events for its "
     "node (OOM kill, preemption, eviction); if it is still running, it hangs (py-spy dump) or cannot reach the "
     "coordinator (a firewall between it and process 0's coordinator_address)."},
    {"jax_src_task_lost", "stopped sending heartbeats", codes::kRankMissing, "", ""},
    {"jax_src_task_lost", "Incarnation ID mismatch", codes::kRankMissing, "", ""},
    {"jax_src_task_lost", "incarnation ID mismatch", codes::kRankMissing, "", ""},
    {"jax_src_barrier", "Barrier timed out", codes::kRankMissing,
     "a JAX barrier timed out: some processes never reached it (they died, hang elsewhere or are still busy)",
     "The message lists the tasks that timed out and how many reached the barrier: compare where each process is "
     "(the tasks missing from the count are the culprits), look for an earlier error in their logs, and check that "
     "every process runs the same code path to the barrier (sync_global_devices, checkpoint saves, shutdown)."},
    {"jax_src_barrier", "barrier has failed", codes::kRankMissing, "", ""},
    {"jax_src_barrier", "barrier failed", codes::kRankMissing, "", ""},
    {"jax_src_barrier", "waited too long for some tasks to show up", codes::kRankMissing, "", ""},
};

// JAX's distributed runtime and XLA's coordination service, by file.
const std::vector<FormatFamily> kJaxFamilies = {
    {"jax_src_preemption", "xla:xla/pjrt/distributed/preemption/", codes::kCommError,
     "JAX's preemption handling: a process was sent SIGTERM (the scheduler preempting or evicting a node) and the "
     "processes could not agree on a sync point",
     "Preemption is the cluster's doing: check the scheduler's events for the node (spot/preemptible capacity, "
     "maintenance, eviction); save checkpoints at `multihost_utils.reached_preemption_sync_point` (or with Orbax's "
     "preemption support) so that a preempted job resumes, and requeue it."},
    {"jax_src_preemption", "xla:xla/tsl/distributed_runtime/preemption/", codes::kCommError, "", ""},
    {"jax_src_coordination", "xla:", codes::kCommError,
     "JAX's coordination service (served by process 0 at coordinator_address) failed: a process could not register, "
     "connect or stay connected, or the service saw an error",
     "Every process must reach process 0's coordinator_address (host:port; a firewall, a wrong address, process 0 "
     "not started or dead) and pass the same num_processes with its own process_id; a process that died first is "
     "the cause when the others report it (its log, run with `python -u`). Slow starts need a longer "
     "initialization_timeout."},
    {"jax_src_init", "jax/", codes::kLaunchError,
     "jax.distributed.initialize could not work out or use the cluster (the coordinator address, the number of "
     "processes, this process's id, its local devices)",
     "Pass coordinator_address, num_processes and process_id explicitly, or run under a launcher JAX detects (Slurm, "
     "Open MPI, Kubernetes, Cloud TPU) with its variables set; call initialize once, before any JAX computation, "
     "in every process."},
    {"jax_src_other", "", codes::kLogError, "JAX's distributed runtime reported an error", "", /*generic=*/true},
};

// Kubernetes' words for what happened to a pod, whichever component says it: the kubelet's events
// and termination reasons, the scheduler's, the training operator's. Tried before the path families.
const std::vector<FormatFamily> kKubernetesPhraseFamilies = {
    {"k8s_src_oom", "OOMKilled", codes::kOutOfMemory,
     "a container went over its memory limit and the kernel killed it (OOMKilled, exit code 137)",
     "Raise the container's `resources.limits.memory` (the pod's request and limit) or use less host memory: "
     "data-loader workers, pinned memory, a dataset held in RAM, CPU offload. /dev/shm as a memory-backed emptyDir "
     "counts against the limit too."},
    {"k8s_src_eviction", "low on resource", codes::kOutOfMemory,
     "the kubelet evicted the pod because its node ran short of memory, disk or inodes (node pressure)",
     "The node, not the job's limit, ran out: give the pod requests equal to its limits (Guaranteed QoS is evicted "
     "last), keep checkpoints and logs off the node's ephemeral storage (a volume), and check which other pods share "
     "the node (`kubectl describe node`)."},
    {"k8s_src_eviction", "Evicted", codes::kOutOfMemory, "", ""},
    {"k8s_src_eviction", "are evicted", codes::kOutOfMemory, "", ""},
    {"k8s_src_scheduling", "nodes are available", codes::kLaunchError,
     "a pod of the job could not be scheduled or admitted: no node has the GPUs, CPU, memory or pod slots it asks "
     "for",
     "Compare the pod's requests (nvidia.com/gpu, cpu, memory) with what the nodes have free (`kubectl describe "
     "nodes`): a distributed job waits until every replica is placed, so one unschedulable worker holds all the "
     "others at rendezvous. Lower the requests, add nodes, or use gang scheduling so that no replica starts alone. "
     "A pod scheduled later (a Scheduled event after this one) only waited.",
     false, false, /*transient=*/true},
    {"k8s_src_scheduling", "Insufficient", codes::kLaunchError, "", ""},
    {"k8s_src_scheduling", "Too many pods", codes::kLaunchError, "", ""},
    {"k8s_src_scheduling", "OutOf", codes::kLaunchError, "", ""},
    {"k8s_src_scheduling", "enough resource", codes::kLaunchError, "", ""},
    {"k8s_src_image", "image", codes::kLaunchError,
     "the container's image could not be pulled or used (a wrong name or tag, no pull secret, a registry that "
     "cannot be reached or rate-limits)",
     "Check the image name and tag, the pod's imagePullSecrets, and that every node can reach the registry; a "
     "large training image pulled by many nodes at once can time out: pre-pull it or use a registry mirror."},
    {"k8s_src_image", "ImagePull", codes::kLaunchError, "", ""},
    {"k8s_src_image", "ErrImage", codes::kLaunchError, "", ""},
    {"k8s_src_image", "InvalidImageName", codes::kLaunchError, "", ""},
    {"k8s_src_image", "ImageInspectError", codes::kLaunchError, "", ""},
    {"k8s_src_probe", "probe", codes::kRankExited,
     "a container's probe failed: after enough failures a liveness or startup probe makes the kubelet restart the "
     "container (a Killing event follows), a readiness probe takes the pod out of its service",
     "A training process busy in a long step, a checkpoint save or a collective does not answer an HTTP or exec "
     "probe in time: give the probe a longer timeoutSeconds/failureThreshold (or none for the training "
     "container), so that a slow step is not mistaken for a hang and killed.",
     false, false, /*transient=*/true},
    {"k8s_src_crashloop", "restarting failed container", codes::kRankExited,
     "the container keeps exiting and Kubernetes keeps restarting it (CrashLoopBackOff)",
     "A consequence: the container's own output says why it exits: `kubectl logs POD -c CONTAINER --previous`; "
     "a restarted rank rejoins a job whose other ranks have moved on, so fix the first failure rather than the "
     "restarts.",
     false, /*consequence=*/true},
    {"k8s_src_crashloop", "CrashLoopBackOff", codes::kRankExited, "", ""},
    {"k8s_src_preemption", "Preempt", codes::kLaunchError,
     "the pod was preempted: Kubernetes removed it to make room for a pod of higher priority",
     "Give the training job a PriorityClass that is not preempted by the workloads that displaced it, or run it "
     "where they do not; checkpoint often enough that a preempted job resumes."},
    {"k8s_src_deadline", "DeadlineExceeded", codes::kLaunchError,
     "the pod or job ran longer than its activeDeadlineSeconds and was stopped",
     "Raise activeDeadlineSeconds (the pod's or the job's runPolicy) to the training's real length, or checkpoint "
     "and resume in several runs."},
    {"k8s_src_deadline", "active longer than specified deadline", codes::kLaunchError, "", ""},
    {"k8s_src_replica_failed", "replica(s) failed", codes::kRankExited,
     "the training operator marked the job failed or restarting because replicas (pods) of it failed",
     "A consequence: the failed replica's own log (`kubectl logs POD --previous`) and its termination reason "
     "(`kubectl describe pod`: OOMKilled, Error and the exit code) say why; the job's restartPolicy and "
     "backoffLimit decide whether it is retried.",
     false, /*consequence=*/true},
    {"k8s_src_replica_failed", "backoff limit", codes::kRankExited, "", ""},
    {"k8s_src_replica_failed", "exited with code", codes::kRankExited, "", ""},
    {"k8s_src_replica_failed", "exitCode", codes::kRankExited, "", ""},
};

// Kubernetes' and the training operator's components, by file.
const std::vector<FormatFamily> kKubernetesFamilies = {
    {"k8s_src_container", "k8s:pkg/kubelet/", codes::kLaunchError,
     "the kubelet or the container runtime could not create, start or run the pod's container (its sandbox, its "
     "configuration, a hook, the runtime itself)",
     "The event names the step that failed: a ConfigMap, Secret or volume the pod refers to must exist "
     "(CreateContainerConfigError), the command must exist in the image (RunContainerError / ContainerCannotRun), "
     "and the node's container runtime and GPU device plugin must be healthy (`kubectl describe node`, the "
     "kubelet's log)."},
    {"k8s_src_container", "containerd:", codes::kLaunchError, "", ""},
    {"k8s_src_container", "cri-dockerd:", codes::kLaunchError, "", ""},
    {"k8s_src_scheduling", "k8s:pkg/scheduler/", codes::kLaunchError, "", ""},
    {"k8s_src_operator", "kubeflow:", codes::kLaunchError,
     "the Kubeflow training operator could not create or manage the job's pods and services (a spec it rejects, "
     "an API call that failed)",
     "Check the job's spec against the operator's validation (replica specs, container names, ports) and the "
     "operator's own log (`kubectl logs -n kubeflow deploy/training-operator`); its RBAC must allow creating pods, "
     "services and podgroups in the job's namespace."},
    {"k8s_src_other", "", codes::kLaunchError, "Kubernetes reported a problem with a pod", "", /*generic=*/true},
};

const FormatFamily& Lead(const std::vector<FormatFamily>& families, const FormatFamily& f) {
  // Continuation rows share their kind's first row's cause and remedy.
  for (const FormatFamily& g : families)
    if (std::string_view(g.kind) == f.kind) return g;
  return f;
}

// How a source's formats name what is filled in.
enum class Style {
  kPrintf,  // %s %d … (C, Go; Slurm's %pJ, %ps …)
  kBraces,  // {} (Python's format and f-strings, C++ fmt, PyTorch's c10::str as the extractors write it)
};
// How a format's family is found.
enum class FamilyKey {
  kPathPrefix,      // the family's path is a prefix of the format's path
  kNameList,        // the family's path lists names ("|a|b|"): CUDA's errors
  kBasenamePrefix,  // the family's path is a prefix of the format file's name: help files
};

// What the code needs to know of one source.
struct SourceSpec {
  FormatSource source;
  const char* title;   // the coverage table's name of it
  const char* prints;  // --explain: "the error formats <prints>"
  const char* file;    // its table's name (collectors/sources/)
  const char* tsv;
  std::vector<FormatFamily> families;        // the phrase families first, then the path families
  const std::vector<FormatFamily>* phrases;  // families found by a phrase of the format (or none)
  Style style;
  bool anchored;   // the message is what follows a fixed prefix: matched from its start
  size_t least;    // literal letters a format (a help text: a line) needs to stand as a pattern: fewer where
                   // only the source's own lines reach the matcher (Kubernetes events, whose reason column
                   // says the rest), more where any exception or log line does (PyTorch, DeepSpeed, JAX)
  bool help_text;  // formats are multi-line help topics (FormatMatcher matches them line by line)
  FamilyKey key;
  bool counts_warnings;  // the source prints warnings with its own calls: counted apart in the coverage table
};

std::vector<FormatFamily> Concat(const std::vector<FormatFamily>& a, const std::vector<FormatFamily>& b) {
  std::vector<FormatFamily> all = a;
  all.insert(all.end(), b.begin(), b.end());
  return all;
}

// Indexed by FormatSource.
const std::vector<SourceSpec>& Specs() {
  static const std::vector<SourceSpec> specs = {
      {FormatSource::kNccl, "NCCL WARN", "NCCL prints (WARN)", "nccl_warn_formats.tsv", kNcclFormatsTsv,
       Concat(kNcclPhraseFamilies, kNcclFamilies), &kNcclPhraseFamilies, Style::kPrintf, true, 8, false,
       FamilyKey::kPathPrefix, false},
      {FormatSource::kTorch, "PyTorch c10d, elastic, torchrun", "PyTorch raises and logs", "torch_c10d_formats.tsv",
       kTorchFormatsTsv, kTorchFamilies, nullptr, Style::kBraces, false, 15, false, FamilyKey::kPathPrefix, true},
      {FormatSource::kDeepSpeed, "DeepSpeed launcher and comm", "DeepSpeed raises and logs", "deepspeed_formats.tsv",
       kDeepSpeedFormatsTsv, kDeepSpeedFamilies, nullptr, Style::kBraces, false, 15, false, FamilyKey::kPathPrefix,
       true},
      {FormatSource::kCuda, "CUDA runtime errors", "CUDA's runtime returns (cudaGetErrorString)", "cuda_errors.tsv",
       kCudaErrorsTsv, kCudaFamilies, nullptr, Style::kBraces, true, 5, false, FamilyKey::kNameList, false},
      {FormatSource::kSlurm, "Slurm srun and slurmstepd", "srun and slurmstepd print (error, fatal)",
       "slurm_formats.tsv", kSlurmFormatsTsv, kSlurmFamilies, nullptr, Style::kPrintf, true, 10, false,
       FamilyKey::kPathPrefix, false},
      {FormatSource::kOpenMpi, "Open MPI help texts", "Open MPI shows (help topics)", "openmpi_help.tsv",
       kOpenMpiHelpTsv, Concat(kOmpiPhraseFamilies, kOmpiFamilies), &kOmpiPhraseFamilies, Style::kPrintf, true, 15,
       true, FamilyKey::kBasenamePrefix, true},
      {FormatSource::kPrrte, "PRRTE help texts (Open MPI 5's mpirun)", "PRRTE shows (help topics)", "prrte_help.tsv",
       kPrrteHelpTsv, Concat(kOmpiPhraseFamilies, kOmpiFamilies), &kOmpiPhraseFamilies, Style::kPrintf, true, 15, true,
       FamilyKey::kBasenamePrefix, true},
      {FormatSource::kJax, "JAX distributed runtime", "JAX and XLA's coordination service raise and log",
       "jax_distributed_formats.tsv", kJaxFormatsTsv, Concat(kJaxPhraseFamilies, kJaxFamilies), &kJaxPhraseFamilies,
       Style::kBraces, false, 15, false, FamilyKey::kPathPrefix, true},
      {FormatSource::kKubernetes, "Kubernetes and the Kubeflow training operator",
       "Kubernetes and the training operator report", "kubernetes_formats.tsv", kKubernetesFormatsTsv,
       Concat(kKubernetesPhraseFamilies, kKubernetesFamilies), &kKubernetesPhraseFamilies, Style::kPrintf, false, 10,
       false, FamilyKey::kPathPrefix, true},
  };
  return specs;
}

const SourceSpec& Spec(FormatSource source) {
  const SourceSpec& s = Specs()[static_cast<size_t>(source)];
  assert(s.source == source && "Specs() is indexed by FormatSource");
  return s;
}

struct Placeholder {
  size_t length = 0;    // characters of the format it takes
  std::string regex;    // what it prints
  std::string example;  // a plausible value
};

// printf: %[flags][width][.precision][length]conversion; Go's %v %q %w %T; Slurm's %pJ %ps … (`extended`).
bool PrintfPlaceholder(std::string_view s, size_t i, bool extended, Placeholder* p) {
  size_t j = i + 1;
  if (j < s.size() && s[j] == '%') {
    *p = {2, "%", "%"};
    return true;
  }
  while (j < s.size() && strchr("-+ #0", s[j])) ++j;
  bool width = false;
  while (j < s.size() && (isdigit(static_cast<unsigned char>(s[j])) || s[j] == '*')) ++j, width = true;
  if (j < s.size() && s[j] == '.') {
    ++j;
    while (j < s.size() && (isdigit(static_cast<unsigned char>(s[j])) || s[j] == '*')) ++j;
  }
  while (j < s.size() && strchr("hlzjtLq", s[j]) && !(extended && s[j] == 'q')) ++j;
  if (j >= s.size()) return false;
  const char c = s[j];
  std::string pad = width ? " *" : "";
  switch (c) {
    case 'd':
    case 'i':
      *p = {j + 1 - i, pad + "-?\\d+", "3"};
      return true;
    case 'u':
      *p = {j + 1 - i, pad + "\\d+", "3"};
      return true;
    case 'x':
    case 'X':
      *p = {j + 1 - i, pad + "[0-9a-fA-F]+", "1f"};
      return true;
    case 'p':
      // Slurm's printf extensions: %pJ (a job), %ps (a step id), %pA (an address) …
      if (extended && j + 1 < s.size() && isalpha(static_cast<unsigned char>(s[j + 1])))
        return *p = {j + 2 - i, ".*?", "StepId=4242.0"}, true;
      *p = {j + 1 - i, "(?:0x[0-9a-fA-F]+|\\(nil\\))", "0x7f3a2c000000"};
      return true;
    case 'f':
    case 'g':
    case 'e':
      *p = {j + 1 - i, pad + "[-+0-9.eE]+", "1.5"};
      return true;
    case 'c':
      *p = {j + 1 - i, ".", "c"};
      return true;
    case 's':
    case 'm':
      *p = {j + 1 - i, ".*?", "val"};
      return true;
    case 'v':
    case 'q':
    case 'w':
    case 'T':
      if (!extended) return false;
      *p = {j + 1 - i, ".*?", "val"};
      return true;
    default:
      return false;
  }
}

// One line of a format: its pieces, literal text and placeholders, in order. `line` is the format's
// first line (a log line holds one line of a message), or for a help text one of its lines.
template <typename OnLiteral, typename OnPlaceholder>
void WalkLine(const SourceSpec& spec, std::string_view line, OnLiteral literal, OnPlaceholder placeholder) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  const bool extended = spec.source != FormatSource::kNccl;
  std::string text;
  for (size_t i = 0; i < line.size();) {
    Placeholder p;
    bool is = false;
    if (spec.style == Style::kPrintf && line[i] == '%') {
      is = PrintfPlaceholder(line, i, extended, &p);
    } else if (spec.style == Style::kBraces && line[i] == '{') {
      size_t close = line.find('}', i);
      if (close != std::string_view::npos && close - i < 40) {
        p = {close + 1 - i, ".*?", "val"};
        is = true;
      }
    }
    if (!is) {
      // Escapes the extractor kept as written (\" \t \r \\).
      if (line[i] == '\\' && i + 1 < line.size()) {
        char n = line[i + 1];
        text += n == 't' ? '\t' : n == 'r' ? '\r' : n;
        i += 2;
        continue;
      }
      text += line[i++];
      continue;
    }
    if (p.regex == "%") {
      text += '%';
    } else {
      literal(text);
      text.clear();
      placeholder(p);
    }
    i += p.length;
  }
  literal(text);
}

// The lines of a format as the extractors write them ("\n" between lines): a help text's all, any
// other's first ("\nLast error:\n{}": the one after a leading line break).
std::vector<std::string_view> FormatLines(const SourceSpec& spec, std::string_view format) {
  std::vector<std::string_view> lines;
  if (!spec.help_text) {
    if (StartsWith(format, "\\n")) format.remove_prefix(2);
    lines.push_back(format.substr(0, format.find("\\n")));
    return lines;
  }
  // Escapes read left to right: "\\\\" is a backslash, "\\n" a line break.
  size_t start = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '\\' || i + 1 >= format.size()) continue;
    if (format[i + 1] == 'n') {
      lines.push_back(format.substr(start, i - start));
      start = i + 2;
    }
    ++i;
  }
  lines.push_back(format.substr(start));
  return lines;
}

size_t LineLetters(const SourceSpec& spec, std::string_view line) {
  size_t n = 0;
  WalkLine(
      spec, line,
      [&](const std::string& t) {
        for (char c : t) n += isalpha(static_cast<unsigned char>(c)) != 0;
      },
      [](const Placeholder&) {});
  return n;
}

size_t LiteralLetters(const SourceSpec& spec, std::string_view format) {
  size_t n = 0;
  for (std::string_view line : FormatLines(spec, format)) n += LineLetters(spec, line);
  return n;
}

// One line's expression. A help text's line is matched whole, leading and inner blanks loosely
// (launcher prefixes are stripped with the blanks after them; a value may be padded).
std::string LineRegex(const SourceSpec& spec, std::string_view line) {
  std::string re;
  WalkLine(
      spec, line,
      [&](const std::string& t) {
        if (!spec.help_text) {
          re += RE2::QuoteMeta(t);
          return;
        }
        for (size_t i = 0; i < t.size();) {
          if (t[i] == ' ' || t[i] == '\t') {
            while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
            re += "\\s*";
            continue;
          }
          size_t j = i;
          while (j < t.size() && t[j] != ' ' && t[j] != '\t') ++j;
          re += RE2::QuoteMeta(t.substr(i, j - i));
          i = j;
        }
      },
      [&](const Placeholder& p) { re += p.regex; });
  if (spec.help_text) re = "\\s*" + re + "\\s*";
  return re;
}

// A help text's lines are the source's formats as FormatMatcher sees them: those with enough text.
bool DistinctiveLine(const SourceSpec& spec, std::string_view line) { return LineLetters(spec, line) >= spec.least; }

}  // namespace

const std::vector<FormatSource>& AllFormatSources() {
  static const std::vector<FormatSource> all = [] {
    std::vector<FormatSource> v;
    for (const SourceSpec& s : Specs()) v.push_back(s.source);
    return v;
  }();
  return all;
}

const char* SourceTitle(FormatSource source) { return Spec(source).title; }
bool IsHelpTextSource(FormatSource source) { return Spec(source).help_text; }

Result<FormatTable> ParseFormatTable(std::string_view tsv, std::string_view name, FormatSource source) {
  FormatTable t;
  t.source = source;
  int line_no = 0;
  bool header = false;
  for (size_t pos = 0; pos < tsv.size();) {
    size_t nl = tsv.find('\n', pos);
    if (nl == std::string_view::npos) nl = tsv.size();
    std::string_view line = tsv.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (t.version.empty()) t.version = std::string(Trim(line.substr(1)));
      continue;
    }
    std::vector<std::string> cols = Split(line, '\t');
    if (!header) {
      if (cols.size() != 4 || cols[0] != "path" || cols[1] != "line")
        return InvalidArgument(std::string(name) + ":" + std::to_string(line_no) +
                               ": expected the header \"path<TAB>line<TAB>how<TAB>format\"");
      header = true;
      continue;
    }
    if (cols.size() != 4)
      return InvalidArgument(std::string(name) + ":" + std::to_string(line_no) + ": " + std::to_string(cols.size()) +
                             " columns, expected 4 (path, line, how, format)");
    SourceFormat f;
    f.path = cols[0];
    f.line = SafeInt(cols[1]);
    if (f.line <= 0)
      return InvalidArgument(std::string(name) + ":" + std::to_string(line_no) + ": line \"" + std::string(cols[1]) +
                             "\" is not a positive number");
    f.how = std::string(cols[2]);
    f.format = std::string(cols[3]);
    t.formats.push_back(std::move(f));
  }
  if (!header) return InvalidArgument(std::string(name) + ": no header line (path, line, how, format)");
  return t;
}

const FormatTable& BuiltinFormats(FormatSource source) {
  static const std::vector<FormatTable> tables = [] {
    std::vector<FormatTable> v;
    for (const SourceSpec& s : Specs()) {
      Result<FormatTable> t = ParseFormatTable(s.tsv, s.file, s.source);
      if (!t.ok()) {
        // A table that does not parse is a build error; the test suite reads every one.
        std::fprintf(stderr, "source formats: %s\n", t.status().message().c_str());
        std::abort();
      }
      v.push_back(std::move(*t));
    }
    return v;
  }();
  return tables[static_cast<size_t>(source)];
}

const std::vector<FormatFamily>& Families(FormatSource source) { return Spec(source).families; }

const FormatFamily& FamilyOf(FormatSource source, const SourceFormat& f) {
  const SourceSpec& spec = Spec(source);
  const auto& families = spec.families;
  if (spec.phrases && !StartsWith(f.path, "src/os/windows"))
    for (const FormatFamily& g : *spec.phrases)
      if (f.format.find(g.path) != std::string::npos) return Lead(families, g);
  const std::string_view base = std::string_view(f.path).substr(f.path.rfind('/') + 1);
  for (const FormatFamily& g : families) {
    bool in = false;
    switch (spec.key) {
      case FamilyKey::kPathPrefix:
        in = StartsWith(f.path, g.path);
        break;
      case FamilyKey::kNameList:
        in = std::string_view(g.path).find("|" + f.path + "|") != std::string_view::npos;
        break;
      case FamilyKey::kBasenamePrefix:
        in = StartsWith(base, g.path);
        break;
    }
    if (in) return Lead(families, g);
  }
  return families.back();
}

std::string FormatRegex(FormatSource source, std::string_view format) {
  const SourceSpec& spec = Spec(source);
  std::string re;
  for (std::string_view line : FormatLines(spec, format)) {
    if (!re.empty()) re += "\\n";
    re += LineRegex(spec, line);
  }
  return re;
}

std::string FormatExample(FormatSource source, std::string_view format) {
  const SourceSpec& spec = Spec(source);
  std::string out;
  bool first = true;
  for (std::string_view line : FormatLines(spec, format)) {
    if (!first) out += '\n';
    first = false;
    WalkLine(
        spec, line, [&](const std::string& t) { out += t; },
        [&](const Placeholder& p) {
          // An untyped placeholder ({}, %v, %s): after "code = ", "pid: ", "rank " … it is a number.
          std::string_view before(out);
          while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
          bool number = source != FormatSource::kNccl && p.example == "val" && !before.empty() &&
                        (before.back() == '=' || EndsWith(before, "code:") || EndsWith(before, "pid:") ||
                         EndsWith(before, "rank") || EndsWith(before, "rank:") || EndsWith(before, "port:") ||
                         EndsWith(before, "size") || EndsWith(before, "exitcode:") || EndsWith(before, "code"));
          out += number ? "3" : p.example;
        });
  }
  return out;
}

bool Distinctive(FormatSource source, std::string_view format) {
  // NCCL's are matched only after "NCCL WARN " and from the message's start; PyTorch's anywhere in
  // an exception or log line, so they need more text of their own. CUDA's strings are the whole of
  // what follows "CUDA error: ", matched from its start. A help text needs one line with enough text.
  const SourceSpec& spec = Spec(source);
  if (spec.help_text) {
    for (std::string_view line : FormatLines(spec, format))
      if (DistinctiveLine(spec, line)) return true;
    return false;
  }
  return LiteralLetters(spec, format) >= spec.least;
}

bool IsWarningFormat(const SourceFormat& f) {
  const std::string& h = f.how;
  if (h.find("warn") != std::string::npos || h.find("WARN") != std::string::npos ||
      h.find("LOG(INFO)") != std::string::npos || h.find("log.Info") != std::string::npos ||
      h.find(".Warn") != std::string::npos)  // Go's log.Warning, logrus.Warnf, glog.Warningf
    return true;
  // Kubernetes: a Normal event is news, unless it records a failure ("PyTorchJob … is failed because …").
  if ((StartsWith(h, "Event(Normal") || StartsWith(h, "Eventf(Normal")) && h.find("Failed") == std::string::npos)
    return true;
  // A container that completed is no problem; one that ended in "Error" says only that it exited
  // non-zero (its own output says why).
  if (h == "reason" && (f.format == "Completed" || f.format == "Error")) return true;
  // A help text that is a warning says so first, unless it announces the job's failure ("Your Open
  // MPI job may now hang or fail", "will now abort").
  std::string_view text = Trim(f.format);
  if (text.find("hang or fail") != std::string_view::npos || text.find("abort") != std::string_view::npos) return false;
  if (StartsWith(text, "WARNING") || StartsWith(text, "Warning:") || StartsWith(text, "NOTE:")) return true;
  // A help text that gives advice the job runs on after ("Another transport will be used instead", "You
  // can disable this warning").
  if (f.path.rfind("help-") == std::string::npos || !EndsWith(f.path, ".txt")) return false;
  for (std::string_view w : {"this warning", "will be used instead", "negatively impact", "performance may",
                             "may be degraded", "will be disabled", "will continue"})
    if (text.find(w) != std::string_view::npos) return true;
  return false;
}

std::string FormatMatch::Source() const { return format ? format->path + ":" + std::to_string(format->line) : ""; }

struct FormatMatcher::Impl {
  const SourceSpec* spec;
  const FormatTable* table;
  std::unique_ptr<RE2::Set> set;
  std::vector<std::vector<size_t>> rows;  // set index → the table rows that print it
  std::vector<size_t> letters;            // set index → literal letters (more wins)
  std::vector<size_t> row_letters;        // help texts: table row → its distinctive lines' letters
};

namespace {
// NCCL's and Slurm's own words for something that is not a failure (a setting or request ignored, a
// fallback taken): a warning, never an error finding.
bool BenignFormat(FormatSource source, std::string_view f) {
  static const std::vector<std::string_view> kNccl = {"being ignored", "Ignoring",  ", ignoring",
                                                      "falling back",  "fall back", "Unsetting",
                                                      "deprecated",    "retrying",  "Retrying"};
  static const std::vector<std::string_view> kSlurm = {
      "ignored", "ignoring", "Ignoring", "disregarding", "going to /tmp instead", "TIOCGWINSZ"};
  const auto* words = source == FormatSource::kNccl ? &kNccl : source == FormatSource::kSlurm ? &kSlurm : nullptr;
  if (!words) return false;
  for (std::string_view w : *words)
    if (f.find(w) != std::string_view::npos) return true;
  return false;
}
}  // namespace

FormatMatcher::FormatMatcher(const FormatTable& table) : impl_(std::make_unique<Impl>()) {
  const SourceSpec& spec = Spec(table.source);
  impl_->spec = &spec;
  impl_->table = &table;
  RE2::Options opts;
  opts.set_max_mem(64 << 20);
  opts.set_log_errors(false);
  impl_->set = std::make_unique<RE2::Set>(opts, spec.help_text  ? RE2::ANCHOR_BOTH
                                                : spec.anchored ? RE2::ANCHOR_START
                                                                : RE2::UNANCHORED);
  std::map<std::string, size_t> seen;  // expression → set index
  auto add = [&](const std::string& re, size_t row, size_t letters) {
    auto [it, fresh] = seen.emplace(re, impl_->rows.size());
    if (!fresh) {
      // The same message printed from several places (a help line several topics share).
      if (spec.help_text) impl_->rows[it->second].push_back(row);
      return;
    }
    if (impl_->set->Add(re, nullptr) < 0) {
      seen.erase(it);
      return;
    }
    impl_->rows.push_back({row});
    impl_->letters.push_back(letters);
  };
  impl_->row_letters.assign(table.formats.size(), 0);
  for (size_t i = 0; i < table.formats.size(); ++i) {
    const SourceFormat& f = table.formats[i];
    if (!spec.help_text) {
      if (spec.source == FormatSource::kKubernetes && f.how == "reason") {
        // A container's termination reason is a whole word ("OOMKilled"): the whole message or nothing.
        add("^" + FormatRegex(table.source, f.format) + "$", i, LiteralLetters(spec, f.format));
      } else if (Distinctive(table.source, f.format)) {
        add(FormatRegex(table.source, f.format), i, LiteralLetters(spec, f.format));
      }
      continue;
    }
    for (std::string_view line : FormatLines(spec, f.format)) {
      if (!DistinctiveLine(spec, line)) continue;
      const size_t n = LineLetters(spec, line);
      impl_->row_letters[i] += n;
      add(LineRegex(spec, line), i, n);
    }
  }
  if (!impl_->set->Compile()) impl_->rows.clear();
}

FormatMatcher::~FormatMatcher() = default;

size_t FormatMatcher::patterns() const { return impl_->rows.size(); }

bool FormatMatcher::Match(std::string_view message, FormatMatch* out) const {
  if (impl_->rows.empty()) return false;
  const SourceSpec& spec = *impl_->spec;
  size_t best = SIZE_MAX;
  std::vector<int> hits;
  if (!spec.help_text) {
    if (!impl_->set->Match(message, &hits) || hits.empty()) return false;
    // The most literal text wins; of equals, the longer format (it asks more of the message: "error %v"
    // over "error").
    int top = hits[0];
    for (int h : hits) {
      const size_t a = impl_->letters[h], b = impl_->letters[top];
      if (a > b || (a == b && impl_->table->formats[impl_->rows[h][0]].format.size() >
                                  impl_->table->formats[impl_->rows[top][0]].format.size()))
        top = h;
    }
    best = impl_->rows[top][0];
    out->score = impl_->letters[top];
  } else {
    // Each distinctive line found counts its letters for every topic that has it, once.
    std::map<size_t, size_t> score;  // row → letters of its lines found
    std::set<int> counted;
    int lines = 0;
    for (size_t pos = 0; pos <= message.size() && lines < 200; ++lines) {
      size_t nl = message.find('\n', pos);
      std::string_view line = message.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      hits.clear();
      if (!Trim(line).empty() && impl_->set->Match(line, &hits))
        for (int h : hits)
          if (counted.insert(h).second)
            for (size_t row : impl_->rows[h]) score[row] += impl_->letters[h];
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
    // The most text found wins; of equals, the topic with the least text not found.
    size_t top = 0;
    for (auto& [row, n] : score)
      if (n > top || (n == top && best != SIZE_MAX && impl_->row_letters[row] < impl_->row_letters[best]))
        top = n, best = row;
    // Enough of the topic to be it: a good share of its distinctive text, or several lines of it (one
    // row such as "  Application name:  train.py" in a program's own box is not a help text).
    if (best == SIZE_MAX || top < spec.least || (top * 100 < 40 * impl_->row_letters[best] && top < 60)) return false;
    out->score = top;
  }
  const SourceFormat& f = impl_->table->formats[best];
  out->format = &f;
  out->family = &FamilyOf(spec.source, f);
  // NCCL's WARN is its error channel, not a warning.
  out->severity = spec.source != FormatSource::kNccl && IsWarningFormat(f)        ? diagnosis::Severity::kInfo
                  : BenignFormat(spec.source, f.format) || out->family->transient ? diagnosis::Severity::kWarning
                                                                                  : diagnosis::Severity::kError;
  return true;
}

const FormatMatcher& FormatMatcher::Default(FormatSource source) {
  // Compiled on first use of each source (a run that reads no help text compiles none).
  static std::once_flag once[static_cast<size_t>(FormatSource::kKubernetes) + 1];
  static const FormatMatcher* matchers[static_cast<size_t>(FormatSource::kKubernetes) + 1];
  const size_t i = static_cast<size_t>(source);
  std::call_once(once[i], [&] { matchers[i] = new FormatMatcher(BuiltinFormats(source)); });
  return *matchers[i];
}

}  // namespace dsd::collectors

// ---- coverage ------------------------------------------------------------------------------------

namespace dsd::collectors {
namespace {

// Readings that name no specific cause: the catch-alls of the hand-written catalogue.
bool GenericKind(const std::string& kind) {
  for (const char* k :
       {"nccl_warn", "nccl_system_error", "nccl_internal_error", "torch_nccl_error", "python_traceback",
        "cxx_terminate", "crash", "cuda_error", "mpi_error", "gloo_enforce", "nccl_src_other", "torch_src_other"})
    if (kind == k) return true;
  return false;
}

// "DEADLINE_EXCEEDED: ": how XLA prints the code of an absl::DeadlineExceededError.
std::string StatusName(const std::string& how) {
  static const std::pair<const char*, const char*> kCodes[] = {{"DeadlineExceeded", "DEADLINE_EXCEEDED"},
                                                               {"Unavailable", "UNAVAILABLE"},
                                                               {"Internal", "INTERNAL"},
                                                               {"Aborted", "ABORTED"},
                                                               {"FailedPrecondition", "FAILED_PRECONDITION"},
                                                               {"InvalidArgument", "INVALID_ARGUMENT"},
                                                               {"NotFound", "NOT_FOUND"},
                                                               {"AlreadyExists", "ALREADY_EXISTS"},
                                                               {"Cancelled", "CANCELLED"},
                                                               {"Unknown", "UNKNOWN"},
                                                               {"ResourceExhausted", "RESOURCE_EXHAUSTED"},
                                                               {"Unimplemented", "UNIMPLEMENTED"}};
  for (auto& [name, code] : kCodes)
    if (how.find(name) != std::string::npos) return std::string(code) + ": ";
  return "";
}

// A line (or lines) as the format would appear in a job's log.
std::string AsLog(FormatSource source, const SourceFormat& f) {
  const std::string msg = FormatExample(source, f.format);
  const std::string& h = f.how;
  if (source == FormatSource::kNccl) return "node-a:4242:4250 [0] NCCL WARN " + msg + "\n";
  if (source == FormatSource::kCuda)  // PyTorch's report of a failed CUDA call, at the end of a traceback
    return "Traceback (most recent call last):\n  File \"/home/user/train.py\", line 42, in <module>\n"
           "    loss.backward()\nRuntimeError: CUDA error: " +
           msg + "\n";
  if (source == FormatSource::kSlurm) {
    // "srun: error: …" / "slurmstepd: error: …"; what the step's tasks print, srun forwards.
    const char* who = StartsWith(f.path, "src/srun/") || StartsWith(f.path, "src/api/") ? "srun" : "slurmstepd";
    const char* level = h.find("fatal") != std::string::npos ? "fatal: " : h == "info" ? "" : "error: ";
    return std::string(who) + ": " + level + msg + "\n";
  }
  if (IsHelpTextSource(source)) {
    // Open MPI's and PRRTE's show_help: the topic between two lines of 74 dashes.
    const std::string dashes(74, '-');
    return dashes + "\n" + msg + "\n" + dashes + "\n";
  }
  if (source == FormatSource::kKubernetes) {
    // `kubectl describe pod`: a container's termination reason, or a row of its events (type, reason,
    // age, from, message); what the operator or the kubelet returns as an error shows in a Failed event.
    if (h == "reason")
      return "    Last State:     Terminated\n      Reason:       " + msg + "\n      Exit Code:    137\n";
    std::string reason = "Failed";
    if (size_t comma = h.find(','); comma != std::string::npos && StartsWith(h, "Event"))
      reason = h.substr(comma + 1, h.find(')', comma) - comma - 1);
    if (!reason.empty() && reason[0] == '*') reason = "PyTorchJob" + reason.substr(1);
    const bool normal = h.find("Normal") != std::string::npos;
    return std::string("  ") + (normal ? "Normal " : "Warning") + "  " + reason + "  2m (x3 over 5m)  " +
           (StartsWith(f.path, "kubeflow:") ? "pytorchjob-controller" : "kubelet") + "  " + msg + "\n";
  }
  if (source == FormatSource::kJax && StartsWith(h, "raise ")) {
    // JAX's own exceptions, raised in its files: the traceback's last frame is JAX's.
    return "Traceback (most recent call last):\n  File \"/home/user/train.py\", line 7, in <module>\n"
           "    jax.distributed.initialize()\n  File \"/usr/lib/python3/site-packages/" +
           f.path + "\", line " + std::to_string(f.line) + ", in initialize\n    raise\n" + h.substr(6) + ": " + msg +
           "\n";
  }
  if (source == FormatSource::kJax) {
    // XLA's C++ logs (glog), its errors as the Python exception they become, JAX's Python logging.
    if (StartsWith(h, "LOG("))
      return "E1207 10:11:12.123456    4242 " + f.path.substr(f.path.rfind('/') + 1) + ":" + std::to_string(f.line) +
             "] " + msg + "\n";
    if (StartsWith(h, "absl::") || StartsWith(h, "Make") || StartsWith(h, "errors::"))
      return "Traceback (most recent call last):\n  File \"/home/user/train.py\", line 7, in <module>\n"
             "    jax.distributed.initialize()\njaxlib.xla_extension.XlaRuntimeError: " +
             StatusName(h) + msg + "\n";
  }
  if (source == FormatSource::kDeepSpeed && h.find("logger") != std::string::npos) {
    // DeepSpeed's logger: "[date time] [LEVEL] [file.py:line:function] message".
    return "[2026-12-07 10:11:12,123] [" + std::string(IsWarningFormat(f) ? "WARNING" : "ERROR") + "] [" +
           f.path.substr(f.path.rfind('/') + 1) + ":" + std::to_string(f.line) + ":main] " + msg + "\n";
  }
  if (IsWarningFormat(f)) {
    if (h.find("warnings.warn") != std::string::npos)
      return "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1234: UserWarning: " + msg + "\n";
    if (h.find("logger") != std::string::npos || h.find("log.") != std::string::npos)
      return "W1207 10:11:12.123000 4242 " + f.path + ":" + std::to_string(f.line) + "] " + msg + "\n";
    return "[W1207 10:11:12.123456789 " + f.path.substr(f.path.rfind('/') + 1) + ":" + std::to_string(f.line) + "] " +
           msg + "\n";
  }
  if (h.find("logger") != std::string::npos || h.find("log.") != std::string::npos)
    return "E1207 10:11:12.123000 4242 " + f.path + ":" + std::to_string(f.line) + "] " + msg + "\n";
  if (h == "LOG(ERROR)" || h == "C10D_ERROR")
    return "[E1207 10:11:12.123456789 " + f.path.substr(f.path.rfind('/') + 1) + ":" + std::to_string(f.line) + "] " +
           msg + "\n";
  // Raised: the end of a traceback. C++ checks surface as RuntimeError (or a torch.distributed
  // error class the traceback names the same way).
  std::string type = "RuntimeError";
  if (StartsWith(h, "raise ")) type = h.substr(6);
  return "Traceback (most recent call last):\n  File \"/home/user/train.py\", line 42, in <module>\n"
         "    dist.all_reduce(t)\n" +
         type + ": " + msg + "\n";
}

struct Reading {
  enum Kind { kSpecific, kGeneric, kNone } kind = kNone;
  std::string by;      // the entry or family that explains it
  bool error = false;  // an error-severity event came of it
};

Reading Read(FormatSource source, const SourceFormat& f) {
  Reading r;
  for (const diagnosis::LogEvent& e : ClassifyLog(0, AsLog(source, f))) {
    r.error |= e.severity == diagnosis::Severity::kError;
    std::string kind = e.kind;
    if (kind == "python_traceback" || kind == "cxx_terminate") {
      std::string cause = e.Field("cause_kind");
      if (!cause.empty()) kind = cause;
    }
    Reading::Kind k = GenericKind(kind) ? Reading::kGeneric : Reading::kSpecific;
    if (r.kind == Reading::kNone || k < r.kind) r.kind = k, r.by = kind;
  }
  return r;
}

std::string Percent(size_t n, size_t of) {
  if (!of) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.1f %%", 100.0 * n / of);
  return buf;
}

}  // namespace

std::string CoverageMarkdown() {
  std::string out =
      "# Log catalogue coverage\n\n"
      "Generated by `dsdoctor analyze --coverage` (collectors/source_formats.cc, CoverageMarkdown); a test keeps this "
      "file equal to it.\n\n"
      "Each error format a source can print (collectors/sources/*.tsv: extracted from the source's code by "
      "scripts/sources/extract_*.py, at the version named) is filled with plausible values, written as it appears in "
      "a job's log (an NCCL WARN line; a PyTorch exception at the end of a traceback, or its C++/Python log line; an "
      "srun or slurmstepd line; an Open MPI help text between its two rules of dashes; an XLA glog line or the "
      "XlaRuntimeError JAX raises; a `kubectl describe` event row or termination reason), and "
      "read by `dsdoctor analyze`'s classifier. *Specific*: a hand-written catalogue entry (docs/log-patterns.md) or "
      "the family of the subsystem (or phrase) that prints it gives a cause and a remedy of its own; a family's cause "
      "is its subsystem's (InfiniBand, sockets, topology, the TCPStore …), a hand-written entry's is the message's "
      "own. *Generic*: only a catch-all "
      "reads it (NCCL WARN with no code, a Python exception the catalogue does not know). *None*: nothing reads it. "
      "Formats with too little text of their own to name one message (\"%s\", \"Wait timeout\") count as generic "
      "unless a hand-written entry knows them. NCCL's Windows-only formats are left out. Warnings the sources print "
      "as such are counted apart: known ones, and how many of them would make an error finding (a false alarm on a "
      "healthy job; the goal is none).\n\n";
  out +=
      "| source | version | error formats | specific | generic | none | warnings | warnings known | warnings "
      "read as errors |\n|---|---|---|---|---|---|---|---|---|\n";
  std::string families;
  for (FormatSource source : AllFormatSources()) {
    const FormatTable& t = BuiltinFormats(source);
    size_t errors = 0, specific = 0, generic = 0, none = 0, warnings = 0, known = 0, false_alarms = 0;
    std::map<std::string, std::pair<size_t, size_t>> by_family;  // kind → (formats, specific)
    std::map<std::string, size_t> by_entry;                      // hand-written entries that read formats
    std::string unexplained;                                     // table rows of the formats with no specific cause
    for (const SourceFormat& f : t.formats) {
      const FormatFamily& fam = FamilyOf(source, f);
      if (std::string_view(fam.kind) == "nccl_src_windows") continue;
      Reading r = Read(source, f);
      if (Spec(source).counts_warnings && IsWarningFormat(f)) {
        ++warnings;
        FormatMatch m;
        known += FormatMatcher::Default(source).Match(FormatExample(source, f.format), &m) || r.kind != Reading::kNone;
        false_alarms += r.error;
        if (r.error)
          unexplained += "| " + f.path + ":" + std::to_string(f.line) + " | " + f.how + " | `" +
                         f.format.substr(0, 150) + "` | a warning read as an error by " + r.by + " |\n";
        continue;
      }
      ++errors;
      auto& fam_row = by_family[fam.kind];
      ++fam_row.first;
      if (r.kind == Reading::kSpecific) {
        ++specific;
        ++fam_row.second;
        if (r.by.find("_src_") == std::string::npos) ++by_entry[r.by];  // not a family's kind
      } else {
        (r.kind == Reading::kGeneric ? generic : none)++;
        std::string shown = f.format.size() > 150 ? f.format.substr(0, 150) + "…" : f.format;
        for (char& ch : shown)
          if (ch == '|') ch = '/';
        unexplained += "| " + f.path + ":" + std::to_string(f.line) + " | " + f.how + " | `" + shown + "` | " +
                       (r.kind == Reading::kGeneric ? r.by : "-") + " |\n";
      }
    }
    const std::string name = SourceTitle(source);
    out += "| " + name + " | " + t.Name() + " | " + std::to_string(errors) + " | " + std::to_string(specific) + " (" +
           Percent(specific, errors) + ") | " + std::to_string(generic) + " | " + std::to_string(none) + " | " +
           (Spec(source).counts_warnings
                ? std::to_string(warnings) + " | " + std::to_string(known) + " | " + std::to_string(false_alarms)
                : std::string("- | - | -")) +
           " |\n";
    families += "\n## " + name + " by subsystem\n\n| family | formats | specific | cause |\n|---|---|---|---|\n";
    for (const FormatFamily& g : Families(source)) {
      auto it = by_family.find(g.kind);
      if (it == by_family.end() || !*g.cause) continue;
      families += "| " + std::string(g.kind) + " | " + std::to_string(it->second.first) + " | " +
                  std::to_string(it->second.second) + " | " + g.cause + " |\n";
      by_family.erase(it);
    }
    if (!by_entry.empty()) {
      families += "\nOf the specific ones, read by hand-written entries first:";
      for (auto& [entry, n] : by_entry) families += " " + entry + " (" + std::to_string(n) + ")";
      families += ".\n";
    }
    if (!unexplained.empty())
      families +=
          "\nWith no specific cause (the generic reading, or - for none):\n\n| where | how | format | read as "
          "|\n|---|---|---|---|\n" +
          unexplained;
  }
  out +=
      "\nWhere the tables come from: NCCL's WARN sites of v2.30.7's source; PyTorch's c10d, elastic and torchrun "
      "formats of v2.6.0's tree (the pytorch/pytorch snapshot was too large to fetch); DeepSpeed's launcher and comm "
      "layer of the installed 0.19.8; CUDA 13.0's runtime error strings (scripts/sources/extract_cuda_errors.py), "
      "read as PyTorch reports them (\"CUDA error: …\"); Slurm's error()/fatal() sites of srun, slurmstepd and their "
      "plugins (PMIx, cgroup, task) on the master branch towards 26.11; Open MPI 4.1.4's help topics (the installed "
      "help files) and PRRTE's (Open MPI 5's mpirun; its command-line option documentation left out), matched "
      "line by line so that a text cut short or with another process's line in it is still found; JAX's distributed "
      "runtime with XLA's coordination service at the XLA commit JAX pins (read from the ROCm/xla fork, which holds "
      "that commit: openxla/xla's snapshot was over the fetch limit); Kubernetes' kubelet and scheduler messages "
      "and the Kubeflow training operator's. Not tabled: MPICH and Intel MPI, Ray, the MPI standard's error strings "
      "(hand-written entries read MPI_ERR_* and MPI_ABORT).\n";
  return out + families;
}

std::string ExplainPatterns(std::string_view query) {
  const bool all = query == "all";
  std::string out;
  for (const LogPattern& p : Catalogue()) {
    if (!all && query != p.kind && query != p.code) continue;
    const char* role = p.role == LogRole::kCause         ? "cause"
                       : p.role == LogRole::kConsequence ? "consequence"
                       : p.role == LogRole::kExit        ? "exit"
                                                         : "context (no finding)";
    out += std::string(p.kind) + "  (" + p.code + ", " + diagnosis::SeverityName(p.severity) + ", " + role + ")\n";
    out += "  source:  hand-written catalogue entry (collectors/log_catalogue.cc)" +
           std::string(*p.refs ? "; documented at " + std::string(p.refs) : "") + "\n";
    out += "  pattern: " + std::string(p.regex) + "\n";
    for (const CatalogueExample& ex : CatalogueExamples())
      if (std::string_view(ex.kind) == p.kind)
        out += "  example: " + std::string(ex.line) + "\n           (the format of " + ex.source + ")\n";
    out += "  says:    " + std::string(p.summary) + "\n";
    if (*p.remedy) out += "  remedy:  " + std::string(p.remedy) + "\n";
    out += "\n";
  }
  for (FormatSource source : AllFormatSources()) {
    const FormatTable& t = BuiltinFormats(source);
    for (const FormatFamily& g : Families(source)) {
      if (!*g.cause || g.generic) continue;  // continuation rows and the catch-alls
      if (!all && query != g.kind && query != g.code) continue;
      std::vector<const SourceFormat*> formats;
      for (const SourceFormat& f : t.formats)
        if (&FamilyOf(source, f) == &g &&
            (Distinctive(source, f.format) || (source == FormatSource::kKubernetes && f.how == "reason")))
          formats.push_back(&f);
      if (formats.empty()) continue;  // a family Open MPI's and PRRTE's tables share, with none in this one
      out += std::string(g.kind) + "  (" + g.code + ", " + (g.transient ? "warning" : "error") + ", " +
             (g.consequence ? "consequence" : "cause") + "; " + std::to_string(formats.size()) + " formats of " +
             t.Name() + ")\n";
      const bool by_name = Spec(source).key == FamilyKey::kNameList;
      const bool by_file = Spec(source).key == FamilyKey::kBasenamePrefix;
      const bool by_phrase = Spec(source).phrases && &g >= &Families(source).front() &&
                             &g < &Families(source).front() + Spec(source).phrases->size();
      out += "  source:  the error formats " + std::string(Spec(source).prints) +
             (by_name     ? std::string(" for the errors listed below")
              : by_phrase ? " with phrases such as \"" + std::string(g.path) + "\""
              : by_file   ? " in its help files " + std::string(g.path) + "…"
                          : " from its files under " + std::string(g.path) + "…") +
             " (collectors/sources/)\n";
      out += "  cause:   " + std::string(g.cause) + "\n  remedy:  " + g.remedy + "\n";
      const size_t shown = query == g.kind ? formats.size() : std::min<size_t>(formats.size(), 3);
      for (size_t i = 0; i < shown; ++i) {
        const SourceFormat& f = *formats[i];
        out += "  format:  " + f.path + ":" + std::to_string(f.line) + "  " + f.format + "\n";
        std::string example(Trim(AsLog(source, f)));
        // Continuation lines indented under the first (a traceback's frames).
        for (size_t nl = example.find('\n'); nl != std::string::npos; nl = example.find('\n', nl + 12))
          example.replace(nl, 1, "\n           ");
        out += "  example: " + example + "\n";
      }
      if (shown < formats.size())
        out += "  … and " + std::to_string(formats.size() - shown) + " more (--explain " + g.kind + ")\n";
      out += "\n";
    }
  }
  return out;
}

}  // namespace dsd::collectors
