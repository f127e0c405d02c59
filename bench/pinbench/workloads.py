"""The workloads the harness knows: how to run each, its quick arguments,
whether --quick runs it, whether it has a pinned-by-hand variant, and a
rough time per run on the H100 (for the plan and the progress estimate
before a real run has been timed)."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str                     # "cuda" (build/cuda/<name>) or "py" (bench/py/<name>.py)
    quick_args: tuple = ()        # appended with --quick
    full_args: tuple = ()         # appended otherwise
    has_pinned: bool = True       # accepts --pinned (the "pinned" variant)
    est_s: float = 10.0           # rough seconds per run, full size
    est_quick_s: float = 3.0      # rough seconds per run, --quick
    target: str = field(default="")  # CMake target and program, defaults to name
    in_quick: bool = False        # one of the workloads --quick runs without --workloads

    def variants(self):
        return ("plain", "pinfast", "pinned") if self.has_pinned else ("plain", "pinfast")

    def args(self, quick):
        return list(self.quick_args if quick else self.full_args)


_SWEEP_QUICK = ("--max-size", "64M", "--budget", "64M", "--max-reps", "20")
_PIPE_QUICK = ("--batch-bytes", "4M", "--batches", "16", "--reps", "2")
_BIDIR_QUICK = ("--bytes", "64M", "--iters", "4", "--reps", "2")
_MULTIGPU_QUICK = ("--sizes", "1M,64M", "--batch", "64M", "--reps", "3")
# node: every visible GPU, new and repeated buffers; full: 1M, 256M, 1G
_NODE_QUICK = ("--sizes", "1M,256M", "--reps", "3")

# Real programs first: what a user runs (training and inference loops); the
# micro workloads follow.
# in_quick: what `--quick` runs without --workloads, a bench of a few minutes
# for a first look (docs/bench.md, "The quick bench"): the real programs
# except train_loader and offload, whose quick runs took 15 and 12.7 s each
# whatever the variant (start-up and set-up, not copies), then sweep and
# small; 7 workloads x 3 variants x (1 warm-up + 3 runs) = 84 runs.
# est_quick_s: train_loader, offload and infer_readback as timed on the H100
# in the full quick set run of docs/results/2026-11-24-h100-real-programs (state_dict 7.7 s
# there at 8 layers); the rest guessed from their sizes, not yet timed.
WORKLOADS = [
    # full: 4 timed epochs, as 2 (the script's default) left its runs 27-42 ms a step apart
    Workload("train_loader", "py", ("--samples", "2560", "--epochs", "1"), ("--epochs", "4"), est_s=60,
             est_quick_s=15),
    Workload("state_dict", "py", ("--layers", "4"), est_s=20, est_quick_s=6.5, in_quick=True),
    Workload("offload", "py", ("--layers", "8", "--reps", "3"), est_s=15, est_quick_s=13),
    Workload("repeat", "cuda", ("--bytes", "256M", "--copies", "6"), est_s=12, est_quick_s=4),
    Workload("infer_readback", "py", ("--steps", "10"), est_s=15, est_quick_s=5.5, in_quick=True),
    Workload("numba_copy", "py", ("--bytes", "256M"), est_s=12, est_quick_s=5, in_quick=True),
    Workload("loader", "cuda", ("--batches", "200"), est_s=10, est_quick_s=3, in_quick=True),
    Workload("image2d", "cuda", ("--frames", "4", "--reps", "3"), est_s=6, est_quick_s=2,
             in_quick=True),
    # rows of 256 bytes: a pitched copy's per-row work, not its bandwidth
    Workload("image2d_rows", "cuda", ("--width", "64", "--height", "16384", "--frames", "2", "--reps", "3"),
             ("--width", "64", "--height", "16384", "--frames", "8", "--reps", "5"), est_s=4, est_quick_s=2,
             target="image2d"),
    # 4K frames into 2D CUDA arrays (a texture's storage): the array's DMA
    Workload("image2d_array", "cuda", ("--array", "--frames", "2", "--reps", "3"),
             ("--array", "--frames", "8", "--reps", "5"), est_s=6, est_quick_s=2, target="image2d"),
    Workload("sweep", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=2, in_quick=True),
    Workload("sweep_shared", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=2),
    Workload("sweep_ptds", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=2),
    Workload("pipeline", "cuda", _PIPE_QUICK, est_s=8, est_quick_s=3),
    Workload("pipeline_ptds", "cuda", _PIPE_QUICK, est_s=8, est_quick_s=3),
    Workload("inference", "cuda", ("--batches", "6", "--reps", "2"), est_s=6, est_quick_s=2),
    Workload("churn", "cuda", ("--iters", "8"), ("--iters", "30"), has_pinned=False,
             est_s=4, est_quick_s=2),
    Workload("small", "cuda", ("--count", "500", "--reps", "3"), est_s=4, est_quick_s=1.5,
             in_quick=True),
    Workload("small_shared", "cuda", ("--count", "500", "--reps", "3"), est_s=4, est_quick_s=1.5),
    Workload("readback", "cuda", ("--bytes", "128M"), est_s=8, est_quick_s=2),
    Workload("volume3d", "cuda", ("--volumes", "2", "--reps", "3"), est_s=6, est_quick_s=2),
    Workload("compute", "cuda", ("--launches", "50"), has_pinned=False, est_s=3, est_quick_s=1.5),
    Workload("bidir", "cuda", _BIDIR_QUICK, est_s=5, est_quick_s=2),
    Workload("bidir_ptds", "cuda", _BIDIR_QUICK, est_s=5, est_quick_s=2),
    Workload("multigpu", "cuda", _MULTIGPU_QUICK, est_s=15, est_quick_s=4),
    Workload("multigpu_procs", "cuda", _MULTIGPU_QUICK + ("--procs",), ("--procs",), est_s=15,
             est_quick_s=5, target="multigpu"),
    Workload("node", "cuda", _NODE_QUICK, est_s=12, est_quick_s=6),
    Workload("node_procs", "cuda", _NODE_QUICK + ("--procs",), ("--procs",), est_s=14, est_quick_s=7,
             target="node"),
    Workload("torch_copy", "py", ("--bytes", "256M"), est_s=15, est_quick_s=7),
    Workload("torch_expandable", "py", ("--bytes", "256M"), est_s=15, est_quick_s=7),
    Workload("tensor_batch", "py", ("--count", "256", "--reps", "3"), est_s=10, est_quick_s=6),
    Workload("torch_train", "py", ("--samples", "512", "--epochs", "2"), est_s=20, est_quick_s=10),
    # torchrun on every visible GPU: start-up (torch, NCCL, loader workers) dominates a
    # quick run; a full one times 180 steps (about 5 s), as fewer vary by 10% run to run
    Workload("ddp_train", "py", ("--steps", "30", "--warmup-steps", "5"), ("--steps", "200", "--warmup-steps", "20"),
             est_s=25, est_quick_s=20),
    Workload("cupy_copy", "py", ("--bytes", "256M"), est_s=12, est_quick_s=5),
    Workload("jax_copy", "py", ("--bytes", "256M"), est_s=15, est_quick_s=8),
]

BY_NAME = {w.name: w for w in WORKLOADS}


def select(spec, quick=False):
    """Workloads named in a comma list ("all" = every one), in the registry's
    order; none named (None or empty): every one, or with quick the quick
    set. Raises ValueError naming unknown ones."""
    if not spec:
        return [w for w in WORKLOADS if w.in_quick or not quick]
    if spec == "all":
        return list(WORKLOADS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError("unknown workload(s): %s (known: %s)"
                         % (", ".join(unknown), ", ".join(BY_NAME)))
    return [w for w in WORKLOADS if w.name in names]
