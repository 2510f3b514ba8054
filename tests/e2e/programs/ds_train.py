# A small DeepSpeed training program (DeepSpeed 0.16.3 or 0.19.8, CPU accelerator, gloo) with one failure
# chosen by SCENARIO, for the e2e tests of `dsdoctor run`. It knows nothing of dsdoctor.
#
#   healthy     a few steps, a checkpoint saved by every rank
#   ckpt_rank0  engine.save_checkpoint() is called under `if rank == 0` (the classic hang)
#   exception   the last rank raises in its data pipeline at step 3
#   straggler   the last rank sleeps 0.4 s before every step
# ZERO_STAGE (0-3, default 0) picks the ZeRO stage: stage 3 shards the parameters, so every forward
# all-gathers them and every backward reduce-scatters the gradients.
import os
import sys
import tempfile
import time

import deepspeed
import torch
import deepspeed.comm as dist

SCENARIO = os.environ.get("SCENARIO", "healthy")
STEPS = int(os.environ.get("STEPS", "8"))


def batch(step, rank):
    if SCENARIO == "exception" and step == 3 and rank == int(os.environ["WORLD_SIZE"]) - 1:
        raise ValueError("corrupt sample in shard %d" % rank)
    g = torch.Generator().manual_seed(step * 100 + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def main():
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    config = {"train_batch_size": 8 * world, "train_micro_batch_size_per_gpu": 8, "steps_per_print": 1000,
              "optimizer": {"type": "SGD", "params": {"lr": 0.01}}}
    stage = int(os.environ.get("ZERO_STAGE", "0"))
    if stage:
        config["zero_optimization"] = {"stage": stage}
        config["zero_allow_untested_optimizer"] = True
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    ckpt_dir = os.environ.get("CKPT_DIR", tempfile.gettempdir() + "/dsd-ds-ckpt-%d" % os.getppid())
    for step in range(STEPS):
        if SCENARIO == "straggler" and rank == world - 1:
            time.sleep(0.4)
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
        if rank == 0:
            print("step %d loss %.4f" % (step, loss.item()), flush=True)
        if step == 4:
            if SCENARIO == "ckpt_rank0":
                if rank == 0:
                    engine.save_checkpoint(ckpt_dir)
            elif SCENARIO == "healthy":
                engine.save_checkpoint(ckpt_dir)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    del engine
    dist.destroy_process_group()  # as torch asks: 2.15 may abort at exit without it


if __name__ == "__main__":
    main()
