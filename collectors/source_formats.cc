#include "collectors/source_formats.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
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

const FormatFamily& Lead(const std::vector<FormatFamily>& families, const FormatFamily& f) {
  // Continuation rows share their kind's first row's cause and remedy.
  for (const FormatFamily& g : families)
    if (std::string_view(g.kind) == f.kind) return g;
  return f;
}

struct Placeholder {
  size_t length = 0;    // characters of the format it takes
  std::string regex;    // what it prints
  std::string example;  // a plausible value
};

// printf: %[flags][width][.precision][length]conversion.
bool PrintfPlaceholder(std::string_view s, size_t i, Placeholder* p) {
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
  while (j < s.size() && strchr("hlzjtLq", s[j])) ++j;
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
    default:
      return false;
  }
}

// The format's pieces: literal text and placeholders, in order; `\n` ends the first line (a log
// line holds one line of a message).
template <typename OnLiteral, typename OnPlaceholder>
void Walk(FormatSource source, std::string_view format, OnLiteral literal, OnPlaceholder placeholder) {
  size_t end = format.find("\\n");
  if (end == 0) {
    // "\nLast error:\n{}": the message's first line is the one after.
    format.remove_prefix(2);
    end = format.find("\\n");
  }
  if (end != std::string_view::npos) format = format.substr(0, end);
  while (!format.empty() && (format.back() == ' ' || format.back() == '\t')) format.remove_suffix(1);
  std::string text;
  for (size_t i = 0; i < format.size();) {
    Placeholder p;
    bool is = false;
    if (source == FormatSource::kNccl && format[i] == '%') {
      is = PrintfPlaceholder(format, i, &p);
    } else if (source != FormatSource::kNccl && format[i] == '{') {
      size_t close = format.find('}', i);
      if (close != std::string_view::npos && close - i < 40) {
        p = {close + 1 - i, ".*?", "val"};
        is = true;
      }
    }
    if (!is) {
      // Escapes the extractor kept as written (\" \t \\).
      if (format[i] == '\\' && i + 1 < format.size()) {
        char n = format[i + 1];
        text += n == 't' ? '\t' : n;
        i += 2;
        continue;
      }
      text += format[i++];
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

size_t LiteralLetters(FormatSource source, std::string_view format) {
  size_t n = 0;
  Walk(
      source, format,
      [&](const std::string& t) {
        for (char c : t) n += isalpha(static_cast<unsigned char>(c)) != 0;
      },
      [](const Placeholder&) {});
  return n;
}

}  // namespace

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
  static const FormatTable nccl = *ParseFormatTable(kNcclFormatsTsv, "nccl_warn_formats.tsv", FormatSource::kNccl);
  static const FormatTable torch = *ParseFormatTable(kTorchFormatsTsv, "torch_c10d_formats.tsv", FormatSource::kTorch);
  static const FormatTable deepspeed =
      *ParseFormatTable(kDeepSpeedFormatsTsv, "deepspeed_formats.tsv", FormatSource::kDeepSpeed);
  static const FormatTable cuda = *ParseFormatTable(kCudaErrorsTsv, "cuda_errors.tsv", FormatSource::kCuda);
  switch (source) {
    case FormatSource::kNccl:
      return nccl;
    case FormatSource::kTorch:
      return torch;
    case FormatSource::kDeepSpeed:
      return deepspeed;
    case FormatSource::kCuda:
      break;
  }
  return cuda;
}

const std::vector<FormatFamily>& Families(FormatSource source) {
  static const std::vector<FormatFamily> nccl = [] {
    std::vector<FormatFamily> all = kNcclPhraseFamilies;
    all.insert(all.end(), kNcclFamilies.begin(), kNcclFamilies.end());
    return all;
  }();
  switch (source) {
    case FormatSource::kNccl:
      return nccl;
    case FormatSource::kTorch:
      return kTorchFamilies;
    case FormatSource::kDeepSpeed:
      return kDeepSpeedFamilies;
    case FormatSource::kCuda:
      break;
  }
  return kCudaFamilies;
}

const FormatFamily& FamilyOf(FormatSource source, const SourceFormat& f) {
  if (source == FormatSource::kNccl && !StartsWith(f.path, "src/os/windows"))
    for (const FormatFamily& g : kNcclPhraseFamilies)
      if (f.format.find(g.path) != std::string::npos) return Lead(kNcclPhraseFamilies, g);
  const auto& families = Families(source);
  for (const FormatFamily& g : families)
    if (source == FormatSource::kCuda ? std::string_view(g.path).find("|" + f.path + "|") != std::string_view::npos
                                      : StartsWith(f.path, g.path))
      return Lead(families, g);
  return families.back();
}

std::string FormatRegex(FormatSource source, std::string_view format) {
  std::string re;
  Walk(
      source, format, [&](const std::string& t) { re += RE2::QuoteMeta(t); },
      [&](const Placeholder& p) { re += p.regex; });
  return re;
}

std::string FormatExample(FormatSource source, std::string_view format) {
  std::string out;
  Walk(
      source, format, [&](const std::string& t) { out += t; },
      [&](const Placeholder& p) {
        // A {} of PyTorch or DeepSpeed has no type: after "code = ", "pid: ", "rank " … it is a number.
        std::string_view before(out);
        while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
        bool number = source != FormatSource::kNccl && p.example == "val" && !before.empty() &&
                      (before.back() == '=' || EndsWith(before, "code:") || EndsWith(before, "pid:") ||
                       EndsWith(before, "rank") || EndsWith(before, "rank:") || EndsWith(before, "port:") ||
                       EndsWith(before, "size") || EndsWith(before, "exitcode:"));
        out += number ? "3" : p.example;
      });
  return out;
}

bool Distinctive(FormatSource source, std::string_view format) {
  // NCCL's are matched only after "NCCL WARN " and from the message's start; PyTorch's anywhere in
  // an exception or log line, so they need more text of their own.
  // CUDA's strings are the whole of what follows "CUDA error: ", matched from its start.
  const size_t least = source == FormatSource::kNccl ? 8 : source == FormatSource::kCuda ? 5 : 15;
  return LiteralLetters(source, format) >= least;
}

bool IsWarningFormat(const SourceFormat& f) {
  const std::string& h = f.how;
  return h.find("warn") != std::string::npos || h.find("WARN") != std::string::npos ||
         h.find("LOG(INFO)") != std::string::npos;
}

std::string FormatMatch::Source() const { return format ? format->path + ":" + std::to_string(format->line) : ""; }

struct FormatMatcher::Impl {
  FormatSource source;
  const FormatTable* table;
  std::unique_ptr<RE2::Set> set;
  std::vector<size_t> row;      // set index → table row
  std::vector<size_t> letters;  // set index → literal letters (more wins)
};

namespace {
// NCCL's own words for something that is not a failure (a setting ignored, a fallback taken).
bool BenignNcclFormat(std::string_view f) {
  for (const char* w : {"being ignored", "Ignoring", ", ignoring", "falling back", "fall back", "Unsetting",
                        "deprecated", "retrying", "Retrying"})
    if (f.find(w) != std::string_view::npos) return true;
  return false;
}
}  // namespace

FormatMatcher::FormatMatcher(const FormatTable& table) : impl_(std::make_unique<Impl>()) {
  impl_->source = table.source;
  impl_->table = &table;
  RE2::Options opts;
  opts.set_max_mem(64 << 20);
  opts.set_log_errors(false);
  impl_->set = std::make_unique<RE2::Set>(
      opts,
      table.source == FormatSource::kNccl || table.source == FormatSource::kCuda ? RE2::ANCHOR_START : RE2::UNANCHORED);
  std::set<std::string> seen;
  for (size_t i = 0; i < table.formats.size(); ++i) {
    const SourceFormat& f = table.formats[i];
    if (!Distinctive(table.source, f.format)) continue;
    std::string re = FormatRegex(table.source, f.format);
    if (!seen.insert(re).second) continue;  // the same message printed from several places
    if (impl_->set->Add(re, nullptr) < 0) continue;
    impl_->row.push_back(i);
    impl_->letters.push_back(LiteralLetters(table.source, f.format));
  }
  if (!impl_->set->Compile()) impl_->row.clear();
}

FormatMatcher::~FormatMatcher() = default;

size_t FormatMatcher::patterns() const { return impl_->row.size(); }

bool FormatMatcher::Match(std::string_view message, FormatMatch* out) const {
  if (impl_->row.empty()) return false;
  std::vector<int> hits;
  if (!impl_->set->Match(message, &hits) || hits.empty()) return false;
  int best = hits[0];
  for (int h : hits)
    if (impl_->letters[h] > impl_->letters[best]) best = h;
  const SourceFormat& f = impl_->table->formats[impl_->row[best]];
  out->format = &f;
  out->family = &FamilyOf(impl_->source, f);
  out->severity = impl_->source == FormatSource::kNccl
                      ? (BenignNcclFormat(f.format) ? diagnosis::Severity::kWarning : diagnosis::Severity::kError)
                      : (IsWarningFormat(f) ? diagnosis::Severity::kInfo : diagnosis::Severity::kError);
  return true;
}

const FormatMatcher& FormatMatcher::Default(FormatSource source) {
  static const FormatMatcher nccl(BuiltinFormats(FormatSource::kNccl));
  static const FormatMatcher torch(BuiltinFormats(FormatSource::kTorch));
  static const FormatMatcher deepspeed(BuiltinFormats(FormatSource::kDeepSpeed));
  static const FormatMatcher cuda(BuiltinFormats(FormatSource::kCuda));
  switch (source) {
    case FormatSource::kNccl:
      return nccl;
    case FormatSource::kTorch:
      return torch;
    case FormatSource::kDeepSpeed:
      return deepspeed;
    case FormatSource::kCuda:
      break;
  }
  return cuda;
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

// A line (or lines) as the format would appear in a job's log.
std::string AsLog(FormatSource source, const SourceFormat& f) {
  const std::string msg = FormatExample(source, f.format);
  if (source == FormatSource::kNccl) return "node-a:4242:4250 [0] NCCL WARN " + msg + "\n";
  if (source == FormatSource::kCuda)  // PyTorch's report of a failed CUDA call, at the end of a traceback
    return "Traceback (most recent call last):\n  File \"/home/user/train.py\", line 42, in <module>\n"
           "    loss.backward()\nRuntimeError: CUDA error: " +
           msg + "\n";
  const std::string& h = f.how;
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
      "a job's log (an NCCL WARN line; a PyTorch exception at the end of a traceback, or its C++/Python log line), and "
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
  for (FormatSource source :
       {FormatSource::kNccl, FormatSource::kTorch, FormatSource::kDeepSpeed, FormatSource::kCuda}) {
    const FormatTable& t = BuiltinFormats(source);
    size_t errors = 0, specific = 0, generic = 0, none = 0, warnings = 0, known = 0, false_alarms = 0;
    std::map<std::string, std::pair<size_t, size_t>> by_family;  // kind → (formats, specific)
    std::map<std::string, size_t> by_entry;                      // hand-written entries that read formats
    std::string unexplained;                                     // table rows of the formats with no specific cause
    for (const SourceFormat& f : t.formats) {
      const FormatFamily& fam = FamilyOf(source, f);
      if (std::string_view(fam.kind) == "nccl_src_windows") continue;
      Reading r = Read(source, f);
      if ((source == FormatSource::kTorch || source == FormatSource::kDeepSpeed) && IsWarningFormat(f)) {
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
    const std::string name = source == FormatSource::kNccl        ? "NCCL WARN"
                             : source == FormatSource::kTorch     ? "PyTorch c10d, elastic, torchrun"
                             : source == FormatSource::kDeepSpeed ? "DeepSpeed launcher and comm"
                                                                  : "CUDA runtime errors";
    out += "| " + name + " | " + t.Name() + " | " + std::to_string(errors) + " | " + std::to_string(specific) + " (" +
           Percent(specific, errors) + ") | " + std::to_string(generic) + " | " + std::to_string(none) + " | " +
           (source == FormatSource::kTorch || source == FormatSource::kDeepSpeed
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
      "\nNot measured yet (no table of their formats is checked in; the hand-written entries cover their common "
      "messages): Open MPI/PRRTE help texts, Slurm's srun and slurmstepd, Kubernetes/Kubeflow operators, JAX's "
      "distributed runtime. CUDA's table holds the runtime's error strings (scripts/sources/extract_cuda_errors.py, "
      "CUDA 13.0), read as PyTorch reports them (\"CUDA error: …\"). The PyTorch table is of v2.6.0's tree (the "
      "pytorch/pytorch snapshot was too large to fetch); DeepSpeed's is read from the installed 0.19.8 package.\n";
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
  for (FormatSource source :
       {FormatSource::kNccl, FormatSource::kTorch, FormatSource::kDeepSpeed, FormatSource::kCuda}) {
    const FormatTable& t = BuiltinFormats(source);
    for (const FormatFamily& g : Families(source)) {
      if (!*g.cause || g.generic) continue;  // continuation rows and the catch-alls
      if (!all && query != g.kind && query != g.code) continue;
      std::vector<const SourceFormat*> formats;
      for (const SourceFormat& f : t.formats)
        if (&FamilyOf(source, f) == &g && Distinctive(source, f.format)) formats.push_back(&f);
      out += std::string(g.kind) + "  (" + g.code + ", error, cause; " + std::to_string(formats.size()) +
             " formats of " + t.Name() + ")\n";
      const bool by_name = source == FormatSource::kCuda;
      const bool by_phrase =
          !by_name && !StartsWith(g.path, "src/") && !StartsWith(g.path, "torch/") && !StartsWith(g.path, "deepspeed/");
      out += "  source:  the error formats " +
             std::string(source == FormatSource::kNccl        ? "NCCL prints (WARN)"
                         : source == FormatSource::kTorch     ? "PyTorch raises and logs"
                         : source == FormatSource::kDeepSpeed ? "DeepSpeed raises and logs"
                                                              : "CUDA's runtime returns (cudaGetErrorString)") +
             (by_name     ? std::string(" for the errors listed below")
              : by_phrase ? " with phrases such as \"" + std::string(g.path) + "\""
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
