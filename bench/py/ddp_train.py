"""ddp_train: data-parallel training on a node of GPUs, as torchrun runs it:
a rank per GPU, each with its DataLoader (--workers processes doing CPU
work per sample: an augmentation of a synthetic image made in-process),
an image model (torchvision's resnet18 when torchvision is there, else a
small CNN) wrapped in DistributedDataParallel, gradients all-reduced by NCCL.
Every batch goes to its GPU with .cuda(non_blocking=True) from the loader's
pageable tensors, or with --pinned from pin_memory=True ones (the pinned
variant). Deterministic: fixed seeds, cudnn.deterministic, no benchmark, no
shuffling, the same samples in the same order on every run, so plain and
pinfast must give bitwise the same losses.

Run as the harness runs it (python ddp_train.py [--gpus N] ...), it starts
torchrun itself (python -m torch.distributed.run --standalone
--nproc-per-node N, this script again) and prints rank 0's JSON line. The
measurement "step": samples/s over the steps after --warmup-steps (all
ranks' samples), and the per-step losses of every rank gathered, as "losses"
(rank 0's, compared by the harness with a tolerance) and "loss_hash" (the
SHA-256 of all ranks' float32 losses, the bitwise check)."""
import argparse
import hashlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
import time

from pyworkload import Report, skip

NAME = "ddp_train"


def args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default=0, type=int, help="ranks, one per GPU (default: every GPU)")
    ap.add_argument("--steps", default=50, type=int, help="training steps (losses hashed over all)")
    ap.add_argument("--warmup-steps", default=10, type=int, help="steps before the timed ones")
    ap.add_argument("--batch", default=96, type=int, help="samples per rank per step")
    ap.add_argument("--side", default=128, type=int, help="images are 3 x side x side")
    ap.add_argument("--workers", default=4, type=int, help="DataLoader processes per rank")
    ap.add_argument("--work", default=2, type=int, help="CPU passes per sample (blur)")
    ap.add_argument("--model", default="resnet18", choices=("resnet18", "cnn"))
    ap.add_argument("--blocking", action="store_true", help=".cuda() without non_blocking")
    ap.add_argument("--pinned", action="store_true", help="pin_memory=True in the DataLoader")
    ap.add_argument("--timeout", default=170, type=float,
                    help="seconds before torchrun is stopped (below the harness's limit for a run)")
    ap.add_argument("--cpu", action="store_true",
                    help="no GPU: gloo between ranks on the CPU (--gpus ranks, default 2), for tests")
    return ap.parse_args()


def gpu_count():
    """GPUs visible, without loading CUDA here (a launcher under pinfast
    should stay a process that makes no CUDA call)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip() and d.strip() != "-1"])
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return sum(1 for line in p.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.TimeoutExpired):
        return 0


def die_with_parent():
    """In torchrun, before it runs: a SIGTERM when this launcher dies (the
    harness kills it at its time limit), which torchrun passes on to its
    workers, so that no rank is left holding a GPU."""
    import ctypes
    import signal
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def launch(a):
    """Starts torchrun on this script and passes on rank 0's JSON line."""
    if importlib.util.find_spec("torch") is None:
        skip(NAME, "no torch")
    n = a.gpus or (2 if a.cpu else gpu_count())
    if n < 1:
        skip(NAME, "no GPU")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
           os.path.abspath(__file__)] + sys.argv[1:]
    # cuBLAS's deterministic workspace (torch.use_deterministic_algorithms)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, preexec_fn=die_with_parent)
    try:
        out, _ = p.communicate(timeout=a.timeout)
    except subprocess.TimeoutExpired:
        p.terminate()  # torchrun stops its workers
        try:
            out, _ = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        sys.stderr.write(out or "")
        print("ddp_train: torchrun ran past %gs" % a.timeout, file=sys.stderr)
        sys.exit(124)
    line = None
    for text in out.splitlines():
        if text.startswith("{") and '"workload"' in text:
            line = text
        else:
            print(text, file=sys.stderr)
    if p.returncode != 0:
        print("ddp_train: torchrun exited %d" % p.returncode, file=sys.stderr)
        sys.exit(p.returncode if 0 < p.returncode < 128 else 1)
    if line is None:
        print("ddp_train: no JSON line from rank 0", file=sys.stderr)
        sys.exit(1)
    print(line, flush=True)


def rank_main(a):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not a.cpu and (not torch.cuda.is_available() or local >= torch.cuda.device_count()):
        # every rank says so and leaves; rank 0's line becomes the skip
        if rank == 0:
            print(json.dumps({"workload": NAME, "skipped": "rank 0 sees no GPU %d" % local}), flush=True)
        sys.exit(0)
    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        dev = torch.device("cuda", local)
        torch.cuda.set_device(local)
        try:
            dist.init_process_group("nccl", device_id=dev)
        except TypeError:  # torch before 2.3
            dist.init_process_group("nccl")
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    # the deterministic kernel wherever there is one; a warning where none
    torch.use_deterministic_algorithms(True, warn_only=True)

    side, pad = a.side, 8

    class Synthetic(Dataset):
        """Sample i of rank r: an image made from a seed of (r, i), cropped
        and flipped by i, then blurred --work times, normalised: the CPU
        work a decoding and augmenting loader does, the same every run."""

        def __len__(self):
            return a.steps * a.batch

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(1_000_003 * (rank + 1) + i)
            img = torch.randint(0, 256, (3, side + pad, side + pad), dtype=torch.uint8, generator=g)
            dy, dx = i % pad, (i // pad) % pad
            x = img[:, dy:dy + side, dx:dx + side].float().div_(255)
            if i % 2:
                x = x.flip(2)
            for _ in range(a.work):
                x = (x + x.roll(1, 1) + x.roll(-1, 1) + x.roll(1, 2) + x.roll(-1, 2)) / 5
            x = (x - 0.5) / 0.25
            return x.contiguous(), (i * 7 + rank) % 10

    def init_worker(_):
        torch.set_num_threads(1)

    loader = DataLoader(Synthetic(), batch_size=a.batch, shuffle=False, drop_last=True,
                        num_workers=a.workers, pin_memory=a.pinned and not a.cpu,
                        worker_init_fn=init_worker,
                        persistent_workers=False, prefetch_factor=2 if a.workers else None)
    if a.model == "resnet18" and importlib.util.find_spec("torchvision") is not None:
        import torchvision
        model, model_name = torchvision.models.resnet18(num_classes=10), "resnet18"
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
        model_name = "cnn"
    model = DDP(model.to(dev), device_ids=None if a.cpu else [local])
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    nb = not a.blocking

    def sync():
        if not a.cpu:
            torch.cuda.synchronize()

    losses, t0 = [], None
    dist.barrier()
    for step, (xb, yb) in enumerate(loader):
        if step == a.warmup_steps:
            sync()
            dist.barrier()
            t0 = time.perf_counter()
        xb = xb.to(dev, non_blocking=nb)
        yb = yb.to(dev, non_blocking=nb)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.detach())  # no .item(): the program runs ahead of the GPU
    sync()
    dist.barrier()
    elapsed = time.perf_counter() - t0 if t0 is not None else 0.0
    mine = torch.stack(losses).float()
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    every = torch.stack(every).cpu()  # ranks x steps
    if rank == 0:
        if not torch.isfinite(every).all():
            print("MISMATCH: a loss is not finite", file=sys.stderr, flush=True)
            sys.exit(2)
        flat = every.flatten().tolist()  # float32 -> float -> float32 is exact; no numpy needed
        digest = hashlib.sha256(struct.pack("<%df" % len(flat), *flat)).hexdigest()[:16]
        timed = len(losses) - a.warmup_steps
        samples = timed * a.batch * world
        per_step = elapsed / timed if timed > 0 else 0.0
        rep = Report(NAME, a.pinned, {k: v for k, v in vars(a).items() if k != "timeout"}
                     | {"ranks": world, "model": model_name, "torch": torch.__version__,
                        "timed_steps": timed, "device": "cpu" if a.cpu else "cuda"})
        rep.add("step", "H2D", a.batch * world * 3 * side * side * 4, [per_step],
                items=a.batch * world, unit="samples",
                losses=[float(v) for v in every[0]], loss_hash=digest)
        rep.print()
    dist.destroy_process_group()


def main():
    a = args()
    if a.warmup_steps >= a.steps:
        sys.exit("ddp_train: --warmup-steps must be below --steps")
    if "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank_main(a)
    else:
        launch(a)


if __name__ == "__main__":
    main()
