// One real-format line per catalogue entry. Every line is written here in the format of a public
// report (cited beside it: the issue or document whose line it follows; host names, pids, sizes
// and paths are ours). A test checks that the entry is the one that wins for its line, the
// fields it extracts, and that both pre-scanners find the line with its launcher prefix.
#include "collectors/log_catalogue.h"

#include <gtest/gtest.h>

#include <set>

#include "collectors/log_classifier.h"
#include "collectors/log_matcher.h"
#include "common/file.h"

namespace dsd::collectors {
namespace {

struct Example {
  const char* kind;
  const char* line;    // as it appears in a log (prefixes included)
  const char* fields;  // "name=value;…" expected among the extracted fields ("" = none checked)
  const char* source;  // the public report whose format the line follows
};

// clang-format off
const Example kExamples[] = {
  // ---- dsdoctor's own lines in a job's output (tests/e2e/slurm_e2e_test)
  {"dsdoctor_own_line", "2026-12-06T11:32:12.535 warning [run] agent node-1: agent at node-1:38675: connect refused (Connection refused): the agent is gone", "", "dsdoctor's log format (common/log.cc)"},
  {"dsdoctor_own_line", "dsdoctor: error AGENT_LOST: the agent on node-0 is gone (connection lost: connection closed by peer)", "", "dsdoctor run's report"},
  // ---- NCCL context
  {"nccl_comm_init", "kolyoz2:25146:25827 [0] NCCL INFO ncclCommInitRank comm 0x559d5aa8ca00 rank 4 nranks 8 cudaDev 0 nvmlDev 0 busId 42000 commId 0x996ee6f117cb8e1e - Init COMPLETE", "self_rank=4;nranks=8", "https://github.com/NVIDIA/nccl-tests/issues/252"},
  {"nccl_comm_init", "node7:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 nranks 16 cudaDev 7 busId e7000 - Init COMPLETE", "self_rank=15;nranks=16", "https://github.com/NVIDIA/nccl/issues/629"},
  {"nccl_version", "gpu-a:9621:9621 [0] NCCL INFO NCCL version 2.18.1+cuda12.1", "version=2.18.1", "https://github.com/NVIDIA/nccl-tests/issues/188"},
  {"nccl_version_banner", "NCCL version 2.19.3+cuda12.3", "version=2.19.3", "https://github.com/NVIDIA/nccl/issues/1267"},
  // ---- NCCL bootstrap and sockets
  {"nccl_no_socket_interface", "lab-a6000-0:223645:223645 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found", "", "https://github.com/EasonXiao-888/MambaTree/issues/14"},
  {"nccl_no_socket_interface", "node1:1200:1200 [0] misc/socket.cc:460 NCCL WARN Net : No interface found in the same subnet as remote address fe80::1461:22ff:fe33:b471<45015>", "remote=fe80::1461:22ff:fe33:b471<45015>", "NVIDIA/nccl src/misc/socket.cc (format); AWS Neuron troubleshooting docs"},
  {"nccl_bootstrap_rank_mismatch", "node1:1200:1290 [0] bootstrap.cc:250 NCCL WARN Bootstrap Root : mismatch in rank count from procs 8 : 4", "got=8;nranks=4", "NVIDIA/nccl src/bootstrap.cc (format)"},
  {"nccl_connect_failed", "ubuntu:39964:40075 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : Software caused connection abort", "peer=10.0.0.2<45763>;error=Software caused connection abort", "https://github.com/NVIDIA/nccl-tests/issues/166"},
  {"nccl_connect_exhausted", "[2025-05-16 10:49:23] vae-0:10209:10243 [1] misc/socket.cc:544 NCCL WARN socketPollConnect: connect returned Connection refused, exceeded error retry count (35)", "function=socketPollConnect;error=Connection refused", "https://github.com/NVIDIA/nccl/issues/1515 (2.24 retry format)"},
  {"nccl_connect_exhausted", "[2026-02-25 16:41:56] gpu-3:2387398:2387398 [3] os/linux.cc:200 NCCL WARN ncclOsSocketPollConnect: connect to 10.82.101.249<37857> returned Connection refused, exceeded error retry count after 35 attempts", "peer=10.82.101.249<37857>", "public sglang log quoted in /tmp research; NVIDIA/nccl os/linux.cc"},
  {"nccl_connect_retry", "worker:101542:101934 [0] NCCL INFO Call to connect returned Connection timed out, retrying", "error=Connection timed out", "https://github.com/Oneflow-Inc/oneflow/issues/3586"},
  {"nccl_socket_closed", "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node1<57557>", "peer=node1<57557>", "https://github.com/NVIDIA/nccl-tests/issues/166"},
  {"nccl_socket_closed", "host:22337:22400 [6] misc/socket.cc:521 NCCL WARN Net : Connection closed by remote peer 10.104.148.191<37877>", "", "https://github.com/NVIDIA/nccl/issues/914"},
  {"nccl_socket_closed", "a100-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe", "peer2=10.200.84.247<58355>", "https://github.com/NVIDIA/nccl/issues/795"},
  {"nccl_proxy_failed", "node2:5811:5890 [3] proxy.cc:1234 NCCL WARN [Service thread] Proxy Call to rank 5 failed (Connect)", "peer=5", "NVIDIA/nccl src/proxy.cc (format); https://github.com/verl-project/verl/issues/108"},
  // ---- NCCL InfiniBand / RoCE
  {"nccl_ib_retry_exceeded", "gpu12:4410:4502 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.2.14<50214> with error 12, opcode 0, len 0, vendor err 129 (Recv)", "peer=10.1.2.14<50214>", "https://github.com/NVIDIA/nccl/issues/426"},
  {"nccl_ib_retry_exceeded", "gpu12:4410:4502 [2] transport/net_ib/p2p.cc:500 NCCL WARN NET/IB: Got completion from peer 10.1.2.14<50214> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=65536 vendor_err=129 req_type=Send hca mlx5_1", "", "newest net_ib/p2p.cc format (NVIDIA/nccl)"},
  {"nccl_ib_flush", "gpu12:4410:4502 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.2.15<41200> with error 5, opcode 1, len 0, vendor err 249 (Send)", "", "https://github.com/NVIDIA/nccl/issues/902"},
  {"nccl_ib_local_protection", "gpu12:4410:4502 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.2.16<41200> with error 4, opcode 0, len 0, vendor err 81 (Recv)", "", "NVIDIA/nccl net_ib printIbWcStatusHint (LOC_PROT_ERR and ACS)"},
  {"nccl_ib_completion_error", "gpu12:4410:4502 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.2.17<41200> with error 10, opcode 0, len 0, vendor err 136 (Recv)", "status=10", "NVIDIA/nccl src/transport/net_ib.cc (format)"},
  {"nccl_ib_async_event", "node48:34050:34121 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error", "event=port error", "https://github.com/Lightning-AI/lit-llama/issues/380"},
  {"nccl_ib_async_event", "node-0:139577:139678 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_1:1 async fatal event on QP (0x7309dc3bb338): invalid request local work queue error", "event=invalid request local work queue error", "https://github.com/NVIDIA/nccl/issues/1919"},
  {"nccl_ib_reg_mr", "node1:2210:2290 [0] misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory", "error=Cannot allocate memory", "https://github.com/NVIDIA/nccl-tests/issues/206"},
  {"nccl_ib_modify_qp", "dgxh100-3:225140:225355 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable", "error=Network is unreachable", "https://github.com/NVIDIA/nccl-tests/issues/185"},
  {"nccl_ib_no_device", "instance-8g:525781:525957 [0] NCCL INFO NET/IB : No device found.", "", "https://github.com/NVIDIA/nccl/issues/1267"},
  // ---- NCCL shared memory, topology, usage
  {"nccl_shm", "ubuntu:9621:9688 [3] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-KWfVyt (size 5967872)", "path=/dev/shm/nccl-KWfVyt", "https://github.com/NVIDIA/nccl-tests/issues/166"},
  {"nccl_shm", "[2026-04-22 21:34:20] ci-runner:202016:202235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space left on device (28)", "path2=/dev/shm/nccl-WU88OE", "https://github.com/pytorch/ci-infra/pull/490"},
  {"nccl_shm_attach", "g148:14937:69361 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)", "path=/dev/shm/nccl-glnlGK", "https://github.com/NVIDIA/nccl/issues/1589"},
  {"nccl_topology", "wsl-pc:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:01/../../0000:01:00.0", "", "https://github.com/NVIDIA/nccl/issues/573"},
  {"nccl_topology", "node1:8801:8880 [0] graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found", "", "https://github.com/NVIDIA/nccl/issues/379"},
  {"nccl_duplicate_gpu", "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000", "a=2;b=0;device=1000", "https://github.com/horovod/horovod/issues/3929"},
  {"nccl_invalid_usage", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1190, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.10.3", "", "https://github.com/pytorch/pytorch/issues/107174"},
  {"nccl_remote_error", "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, remote process exited or there was a network error, NCCL version 2.21.5", "", "https://github.com/NVIDIA/nccl/issues/2076"},
  {"nccl_comm_aborted", "RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure was: Work: WorkNCCL(OpType=ALLREDUCE, TensorShape=[1], Timeout(ms)=2000) timed out in call to wait().", "self_rank=1", "https://github.com/pytorch/pytorch/pull/64241"},
  {"nccl_nvls_failure", "[2025-04-08 08:39:46] devgpu263:589012:591652 [0] transport/nvls.cc:254 NCCL WARN Cuda failure 1 'invalid argument'", "", "https://github.com/pytorch/pytorch/issues/150852"},
  {"nccl_library_mismatch", "Invalid config blocking attribute value -2147483648", "attribute=blocking;value=-2147483648", "https://github.com/vllm-project/vllm/issues/1726"},
  {"nccl_ib_size_mismatch", "node-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536", "local=496640;remote=65536", "https://github.com/NVIDIA/nccl/issues/969"},
  {"nccl_no_net_plugin", "[2026-05-05 06:16:47] node-01:189884:189884 [3] plugin/net.cc:334 NCCL WARN Failed to initialize any NET plugin", "", "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/logging.html"},
  {"nccl_no_ibverbs", "ip-172-31-0-137:14605:14673 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]", "", "https://github.com/pytorch/pytorch/issues/68893"},
  {"nccl_cuda_failure", "[rank7]: Cuda failure 1 'invalid argument'", "error=invalid argument", "https://github.com/NVIDIA/nccl/issues/1410"},
  {"nccl_cuda_failure", "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:911, unhandled cuda error, NCCL version 2.7.8", "", "https://github.com/facebookresearch/SlowFast/issues/462"},
  {"nccl_system_error", "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.14.3", "", "https://github.com/verl-project/verl/issues/108"},
  {"nccl_internal_error", "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, internal error, NCCL version 2.14.3", "", "https://github.com/EasonXiao-888/MambaTree/issues/14"},
  {"nccl_warn", "gpu-1:1200:1250 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3", "message=socketFinalizeAccept: wrong type 4 != 3", "https://github.com/NVIDIA/nccl-tests/issues/188"},
  // ---- PyTorch process groups
  {"runtime_watchdog", "[2026-12-02 10:00:00.000] [runtime] [warning] watchdog: rank 0: barrier#5 @save_checkpoint in flight for 3.0 s (timeout 3.0 s); policy abort", "self_rank=0", "dsdoctor's bundled runtime (runtime/watchdog.cc)"},
  {"torch_watchdog", "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.", "self_rank=1;seq=469508;op=ALLREDUCE;timeout_ms=1800000", "https://github.com/OFA-Sys/OFA/issues/271"},
  {"torch_watchdog", "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.", "self_rank=0;seq=1580;op=ALLREDUCE", "https://github.com/hiyouga/LlamaFactory/issues/6269"},
  {"torch_blocking_wait_timeout", "[rank1]:[E1002 18:16:40.662691402 ProcessGroupNCCL.cpp:756] [Rank 1] Work WorkNCCL(SeqNum=2521, OpType=ALLREDUCE, NumelIn=160672064, NumelOut=160672064, Timeout(ms)=600000) timed out in blocking wait.", "seq=2521;op=ALLREDUCE", "https://github.com/huggingface/diffusers/issues/12422"},
  {"torch_async_exception", "Collective WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1000000) raised the following async exception: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.25.1", "seq=2;op=ALLREDUCE", "https://github.com/pytorch/pytorch/issues/149984"},
  {"torch_watchdog_stuck", "[rank2]:[E704 13:48:58.260494728 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.", "seconds=480", "https://github.com/hiyouga/LlamaFactory/issues/8549"},
  {"torch_watchdog_takedown", "[rank9]:[E ProcessGroupNCCL.cpp:583] [Rank 9] To avoid data inconsistency, we are taking the entire process down.", "", "https://github.com/OFA-Sys/OFA/issues/271"},
  {"torch_work_timeout", "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.", "seq=808;enqueued=811;completed=807", "https://github.com/XPixelGroup/BasicSR/issues/737"},
  {"torch_nccl_uniqueid_store", "gpu004: RuntimeError: [15] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer. This may indicate a possible application crash on rank 0 or a network set up issue.", "self_rank=15;subject=0;error=Connection reset by peer", "https://github.com/hiyouga/LlamaFactory/issues/2470"},
  {"torch_fingerprint_mismatch", "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=ALLREDUCE, TensorShape=[1], TensorDtypes=Float), but Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=0OpType=REDUCE).", "", "https://github.com/pytorch/pytorch/issues/78022, https://github.com/modelscope/ms-swift/pull/9443"},
  {"torch_ddp_unused_params", "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss.", "", "https://github.com/hkchengrex/Cutie/issues/125 (with the DDP docs' wording)"},
  {"torch_nccl_error", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid argument, NCCL version 2.14.3", "message=invalid argument, NCCL version 2.14.3", "https://github.com/vllm-project/vllm/issues/1726"},
  // ---- PyTorch store and rendezvous
  {"torch_eaddrinuse", "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use.", "port=29500", "https://github.com/om-ai-lab/VLM-R1/issues/289"},
  {"torch_eaddrinuse", "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).", "", "https://github.com/showlab/Tune-A-Video/issues/90"},
  {"torch_store_retrying", "[W728 15:01:59.562622567 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host 127.0.0.1:48315 - retrying (try=0, timeout=1800000ms, delay=496ms): Connection refused", "host=127.0.0.1;port=48315;state=retrying", "https://github.com/lzhxmu/CPPO/issues/6"},
  {"torch_store_connect_timeout", "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect to (172.17.0.9, 46229).", "host=172.17.0.9;port=46229;timeout=600000ms", "https://github.com/vllm-project/vllm/issues/19670"},
  {"torch_store_connect_timeout", "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to 192.0.0.1:1234", "host=192.0.0.1;port=1234", "https://github.com/pytorch/pytorch/issues/107021"},
  {"torch_store_connect_failed", "[W socket.cpp:601] [c10d] The client socket has failed to connect to [node-0]:29500 (errno: 111 - Connection refused).", "host=node-0;port=29500", "torch/csrc/distributed/c10d/socket.cpp (format)"},
  {"torch_store_wait_clients", "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.", "seconds=1801;joined=1;total=3", "https://github.com/OpenRLHF/OpenRLHF/issues/1040"},
  {"torch_store_get_timeout", "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /broadcast_from/0/75465", "ms=300000;keys=/broadcast_from/0/75465", "https://github.com/modelscope/ms-swift/issues/4906"},
  {"torch_store_get_timeout", "RuntimeError: Socket Timeout", "", "https://github.com/pytorch/pytorch/issues/55571"},
  {"torch_rendezvous_timeout", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "", "https://pytorch.org/docs/stable/elastic/rendezvous.html"},
  {"torch_dist_store_error", "torch.distributed.DistStoreError: Failed to recv, got 0 bytes. Connection was likely closed.", "message=Failed to recv, got 0 bytes. Connection was likely closed.", "torch/csrc/distributed/c10d/Utils.hpp recvBytes (format)"},
  // ---- launchers
  {"elastic_failed", "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 5 (pid: 59469) of binary: /home/user/.conda/envs/deit/bin/python", "exit_code=1;local_rank=5;pid=59469", "https://github.com/pytorch/pytorch/issues/88251"},
  {"elastic_failed", "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python", "exit_code=-9", "https://github.com/lmzpai/roboMamba/issues/10"},
  {"elastic_closing_signal", "[2024-04-10 16:02:56,193] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 270 closing signal SIGTERM", "pid=270;signame=SIGTERM", "https://github.com/aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow/issues/93"},
  {"elastic_closing_signal", "W0227 17:39:41.936000 293814 site-packages/torch/distributed/elastic/multiprocessing/api.py:766] Closing process 293866 via signal SIGTERM", "pid2=293866", "https://github.com/NVIDIA/nvidia-resiliency-ext/issues/18"},
  {"elastic_signal_received", "  traceback : Signal 9 (SIGKILL) received by PID 79468", "signal=9;pid=79468", "https://github.com/Vision-CAIR/MiniGPT-4/issues/237 (ChildFailedError table row; torch/distributed/elastic/multiprocessing/errors/__init__.py)"},
  {"ds_launcher_exit", "[2024-02-03 11:48:17,300] [ERROR] [launch.py:322:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', '--local_rank=1', '--deepspeed'] exits with return code = -9", "local_rank=1;exit_code=-9", "https://github.com/deepspeedai/DeepSpeed/issues/5066"},
  {"ds_launcher_killing", "worker-1: [2024-02-03 11:48:17,107] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 2694488", "pid=2694488", "https://github.com/deepspeedai/DeepSpeed/issues/5066"},
  {"ssh_connect_failed", "worker-2: ssh: connect to host worker-2 port 22: Connection refused", "host=worker-2;port=22;error=Connection refused", "https://github.com/deepspeedai/DeepSpeedExamples/issues/894"},
  {"ds_host_not_reachable", "RuntimeError: Using hostfile at /home/552/dz9214/hostfile but host=gadi-gpu-v100-0011 was not reachable via ssh. If you are running with a single node please remove /home/552/dz9214/hostfile or setup passwordless ssh.", "host=gadi-gpu-v100-0011", "https://github.com/hpcac/2023-APAC-HPC-AI/issues/1"},
  {"ssh_host_unresolved", "ssh: Could not resolve hostname worker-9: Name or service not known", "host=worker-9", "OpenSSH client message (format)"},
  {"ssh_permission_denied", "worker-2: user@worker-2: Permission denied (publickey,password).", "", "OpenSSH client message; https://www.deepspeed.ai/getting-started/#resource-configuration-multi-node"},
  {"pdsh_ssh_unreachable", "pdsh@launcher: worker-2: ssh exited with exit code 255", "host=worker-2", "https://github.com/deepspeedai/DeepSpeed/pull/1994 (pdsh exit codes)"},
  {"pdsh_ssh_exit", "pdsh@launcher: worker-1: ssh exited with exit code 1", "host=worker-1;exit_code=1", "https://github.com/deepspeedai/DeepSpeed/pull/1994 (pdsh -S exit codes)"},
  {"pdsh_command_timeout", "pdsh@fortoy0: fortoy101: command timeout", "host=fortoy101", "pdsh(1) -u timeout message"},
  {"slurm_task_oom", "srun: error: nid001277: tasks 1-3: Out Of Memory", "host=nid001277;tasks=1-3", "https://github.com/chrisknewman/tusas/issues/149"},
  {"slurm_task_exit", "srun: error: slurm-job-compute-0-0: tasks 2-7: Exited with exit code 1", "host=slurm-job-compute-0-0;tasks=2-7;exit_code=1", "https://github.com/facebookresearch/ParlAI/issues/3084"},
  {"slurm_oom_kill", "slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks have been OOM Killed.", "count=1", "https://slurm.schedmd.com/ (slurmstepd message)"},
  {"slurm_step_mem_exceeded", "slurmstepd-node-1: error: StepId=1.0 exceeded memory limit (642932736 > 314572800), being killed", "step=1.0;used=642932736;limit=314572800", "Slurm 22.05 slurmstepd (jobacct_gather OverMemoryKill), tests/e2e/slurm_e2e_test"},
  {"slurm_mem_exceeded", "slurmstepd: error: Exceeded step memory limit at some point.", "when= at some point", "https://bugs.schedmd.com/show_bug.cgi?id=3214 (slurmstepd message)"},
  {"slurm_cancelled", "slurmstepd: error: *** STEP 440575.0 ON nid001277 CANCELLED AT 2023-12-05T07:16:01 DUE TO TIME LIMIT ***", "step=440575.0;host=nid001277", "https://github.com/chrisknewman/tusas/issues/149"},
  {"ds_build_extension", "RuntimeError: Error building extension 'fused_adam'", "extension=fused_adam", "https://github.com/deepspeedai/DeepSpeed/issues/629"},
  {"mpi_daemon_start", "ORTE was unable to reliably start one or more daemons.", "", "https://github.com/kubeflow/mpi-operator/issues/152"},
  {"mpi_daemon_lost", "An ORTE daemon has unexpectedly failed after launch and before", "", "https://github.com/radical-cybertools/radical.pilot/issues/2417"},
  {"mpi_daemon_lost", "ORTE has lost communication with a remote daemon.", "", "https://github.com/kubeflow/mpi-operator/issues/152"},
  {"mpi_tcp_connect", "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This", "", "https://github.com/jbornschein/mpi4py-examples/issues/11"},
  {"mpi_connect_bridge", "  Message:    connect() to 172.17.0.1:1025 failed", "address=172.17.0.1;port=1025", "https://github.com/open-mpi/ompi/issues/6377 (docker0 picked by btl_tcp)"},
  {"mpi_connect_detail", "  Message:    connect() to 10.128.0.7:1026 failed", "address=10.128.0.7;port=1026", "https://github.com/jbornschein/mpi4py-examples/issues/11 (format; a routable address)"},
  {"mpi_unreachable", "[worker-1][[1234,1],3][btl_tcp_endpoint.c:626:mca_btl_tcp_endpoint_recv_connect_ack] received unexpected process identifier; unable to complete a TCP connection", "", "Open MPI btl/tcp endpoint messages (format), https://github.com/open-mpi/ompi/issues/4963"},
  {"mpi_not_enough_slots", "There are not enough slots available in the system to satisfy the 4 slots", "", "https://github.com/open-mpi/ompi/issues/1571"},
  {"mpirun_noticed", "mpirun noticed that process rank 7 with PID 0 on node DESKTOP-G7NUGFV exited on signal 9 (Killed).", "subject=7;host=DESKTOP-G7NUGFV;signal=9", "https://github.com/SPECFEM/specfem2d/issues/1210"},
  {"mpirun_noticed", "mpiexec noticed that process rank 0 with PID 10313 on node proton exited on signal 6 (Aborted).", "subject=0;signal=6", "https://github.com/adda-team/adda/issues/151"},
  {"mpirun_exited_due_to", "mpirun has exited due to process rank 0 with PID 0 on node worker-1", "subject=0;host=worker-1", "https://github.com/open-mpi/ompi/issues/6379"},
  {"mpirun_exit_code", "mpirun detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:", "", "Open MPI help-mpirun.txt (format)"},
  {"mpi_abort", "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD", "subject=3", "Open MPI help-mpi-api.txt (format)"},
  {"mpi_error", "[worker-1:01234] *** An error occurred in MPI_Allreduce", "", "Open MPI errhandler output (format)"},
  // ---- Gloo and sockets
  {"gloo_size_mismatch", "  what():  [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 6232 vs 4", "got=6232;expected=4", "public training-code comment quoting gloo pair.cc (see research notes)"},
  {"gloo_enforce", "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: eth5", "condition=ifa != nullptr. Unable to find address for: eth5", "gloo/transport/tcp/device.cc (format)"},
  {"gloo_timeout", "[rank2]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete", "ms=1800000;what=recv", "https://github.com/meta-pytorch/torchtune/issues/2676"},
  {"peer_closed", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [18.25.6.30]:28048", "peer=18.25.6.30;port=28048", "https://github.com/pytorch/pytorch/issues/75512"},
  {"peer_reset", "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error [192.168.70.92]:25266: Connection reset by peer", "", "https://github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI/issues/1882"},
  {"broken_pipe", "BrokenPipeError: [Errno 32] Broken pipe", "", "CPython errno message"},
  {"socket_refused", "ConnectionRefusedError: [Errno 111] Connection refused", "", "CPython errno message"},
  {"socket_no_route", "OSError: [Errno 113] No route to host", "", "CPython errno message"},
  // ---- CUDA and memory
  {"cuda_oom", "RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.90 GiB total capacity; 13.13 GiB already allocated; 415.88 MiB free; 14.80 GiB reserved in total by PyTorch)", "", "https://github.com/2KangHo/vdsr_pytorch/issues/2"},
  {"cuda_oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total capacity of 31.47 GiB of which 12.73 GiB is free.", "", "https://github.com/murong-xu/CADS/issues/4 (torch >= 2.1 format)"},
  {"cuda_illegal_address", "RuntimeError: CUDA error: an illegal memory access was encountered", "", "https://github.com/hpcaitech/Open-Sora/issues/694"},
  {"cuda_invalid_ordinal", "RuntimeError: CUDA error: invalid device ordinal", "", "https://github.com/hpcaitech/Open-Sora/issues/40 (torch.cuda.set_device(local_rank) on a node with fewer GPUs)"},
  {"cuda_invalid_ordinal", "init_distributed: cudaSetDevice(1): invalid device ordinal", "", "dsdoctor's runtime, 2 ranks on a one-GPU H200 (2026-12-04)"},
  {"cuda_device_assert", "RuntimeError: CUDA error: device-side assert triggered", "", "https://github.com/layumi/Person_reID_baseline_pytorch/issues/372"},
  {"cuda_ecc", "RuntimeError: CUDA error: uncorrectable ECC error encountered", "", "https://github.com/jade-hpc-gpu/jade-hpc-gpu.github.io/issues/194"},
  {"cuda_driver_mismatch", "RuntimeError: The NVIDIA driver on your system is too old: CUDA driver version is insufficient for CUDA runtime version", "", "CUDA runtime error string cudaErrorInsufficientDriver"},
  {"cuda_error", "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`", "", "https://github.com/isl-org/DPT/issues/4"},
  {"kernel_oom_kill", "[Tue May  7 10:00:00 2024] Out of memory: Killed process 4242 (python3) total-vm:93000000kB, anon-rss:62000000kB", "pid=4242;comm=python3", "Linux mm/oom_kill.c message"},
  {"shell_killed", "Killed", "", "https://github.com/castorini/hedwig/issues/70"},
  {"shell_killed", "/bin/bash: line 27: 318 Killed sh start.sh", "", "https://github.com/divamgupta/deep-clustering-kingdra/issues/2"},
  {"python_memory_error", "MemoryError", "", "CPython exception"},
  {"torch_watchdog_terminated", "terminate called after throwing an instance of 'c10::DistBackendError' ... NCCL watchdog thread terminated with exception: NCCL error: unhandled system error", "", "https://github.com/pytorch/pytorch/issues/118369"},
  {"crash", "Fatal Python error: Segmentation fault", "", "CPython faulthandler output"},
  {"no_space_left", "OSError: [Errno 28] No space left on device: '/ckpt/global_step100/mp_rank_00_model_states.pt'", "", "CPython errno message"},
};
// clang-format on

std::map<std::string, std::string> ParseFields(const std::string& spec) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t semi = spec.find(';', pos);
    std::string kv = spec.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    size_t eq = kv.find('=');
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
    if (semi == std::string::npos) break;
    pos = semi + 1;
  }
  return out;
}

class CatalogueEntryTest : public ::testing::TestWithParam<Example> {};

TEST_P(CatalogueEntryTest, TheEntryWinsForItsLineWithItsFields) {
  const Example& ex = GetParam();
  PatternMatch m;
  // The message as the scanner hands it over: the line's launcher prefixes stay where they are
  // (matching is unanchored), except "[rank7]: "-style ones which the scanner strips.
  ASSERT_TRUE(LogPatternSet::Default().Match(ex.line, &m)) << ex.line;
  EXPECT_STREQ(m.pattern->kind, ex.kind) << ex.line;
  for (auto& [k, v] : ParseFields(ex.fields)) EXPECT_EQ(m.Field(k.c_str()), v) << ex.kind << " field " << k;
  // Every finding names a cause and says what to do.
  if (m.pattern->role != LogRole::kContext) {
    EXPECT_GT(std::string(m.pattern->remedy).size(), 40u) << ex.kind;
    EXPECT_FALSE(m.Summary().empty());
    EXPECT_EQ(m.Summary().find('{'), std::string::npos) << "unfilled field in " << m.Summary();
  }
}

TEST_P(CatalogueEntryTest, BothPreScannersFindTheLine) {
  const Example& ex = GetParam();
  std::vector<std::string> triggers;
  for (const LogPattern& p : Catalogue()) triggers.push_back(TriggerOf(p.regex));
  std::string text = std::string("step 1 loss 0.5\n") + ex.line + "\nstep 2 loss 0.4\n";
  std::vector<std::unique_ptr<LineScanner>> scanners;
  scanners.push_back(MakeRe2Scanner(triggers));
  if (auto hs = MakeHyperscanScanner(triggers, nullptr)) scanners.push_back(std::move(hs));  // absent without Hyperscan
  for (auto& scanner : scanners) {
    std::vector<std::string> lines;
    scanner->Scan(text, [&](size_t b, size_t e) {
      lines.push_back(text.substr(b, e - b));
      return true;
    });
    EXPECT_EQ(lines, std::vector<std::string>{ex.line}) << scanner->engine();
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, CatalogueEntryTest, ::testing::ValuesIn(kExamples), [](const auto& info) {
  return std::string(info.param.kind) + "_" + std::to_string(info.index);
});

TEST(CatalogueTest, EveryEntryHasAnExampleAndAUniqueKind) {
  std::set<std::string> with_example, kinds;
  for (const Example& ex : kExamples) with_example.insert(ex.kind);
  for (const LogPattern& p : Catalogue()) {
    EXPECT_TRUE(kinds.insert(p.kind).second) << "duplicate kind " << p.kind;
    EXPECT_TRUE(with_example.count(p.kind)) << "catalogue entry without a test line: " << p.kind;
    EXPECT_TRUE(diagnosis::IsKnownCode(p.code)) << p.kind;
  }
}

TEST(CatalogueTest, HyperscanCompilesEveryTrigger) {
  std::vector<std::string> triggers;
  for (const LogPattern& p : Catalogue()) triggers.push_back(TriggerOf(p.regex));
  for (auto& t : LogClassifier::Triggers()) triggers.push_back(t);
  std::string why;
  auto hs = MakeHyperscanScanner(triggers, &why);
  if (!hs && why == "built without Hyperscan") GTEST_SKIP() << why;
  EXPECT_TRUE(hs) << why;
}

TEST(CatalogueTest, DocsListEveryEntryAsTheCatalogueHasIt) {
  auto doc = ReadFile(DOCS_DIR "/log-patterns.md");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(*doc, CatalogueMarkdown()) << "regenerate: ./build/bin/dsdoctor analyze --list-patterns > docs/log-patterns.md";
}

TEST(CatalogueTest, TriggerDropsGroupsAndAnchors) {
  EXPECT_EQ(TriggerOf(R"(^(?:Killed|x)\s*$)"), "(?:Killed|x)");
  EXPECT_EQ(TriggerOf(R"(rank (?P<self_rank>\d+) of)"), R"(rank (?:\d+) of)");
  EXPECT_EQ(TriggerOf(R"(^MemoryError\b)"), R"(MemoryError\b)");
}

TEST(CatalogueTest, OrdinaryTrainingOutputMatchesNothing) {
  for (const char* line : {"step 10 loss 0.25 lr 1e-4",
                           "[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0",
                           "node1:1234:1300 [0] NCCL INFO Channel 00/02 :    0   1",
                           "node1:1234:1300 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
                           "node1:1234:1300 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
                           "node1:1234:1300 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
                           "Epoch 1:  45%|████▌     | 45/100 [00:10<00:12,  4.41it/s, loss=0.123]",
                           "saving checkpoint to /ckpt/step100"}) {
    PatternMatch m;
    EXPECT_FALSE(LogPatternSet::Default().Match(line, &m)) << line << " matched " << m.pattern->kind;
  }
}

}  // namespace
}  // namespace dsd::collectors
