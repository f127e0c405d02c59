"""The workloads the harness knows: how to run each, its quick arguments,
whether it has a pinned-by-hand variant, and a rough time per run on the
H100 (for the progress estimate before a real run has been timed)."""
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

    def variants(self):
        return ("plain", "pinfast", "pinned") if self.has_pinned else ("plain", "pinfast")

    def args(self, quick):
        return list(self.quick_args if quick else self.full_args)


_SWEEP_QUICK = ("--max-size", "64M", "--budget", "64M", "--max-reps", "20")
_PIPE_QUICK = ("--batch-bytes", "4M", "--batches", "16", "--reps", "2")
_BIDIR_QUICK = ("--bytes", "64M", "--iters", "4", "--reps", "2")
_MULTIGPU_QUICK = ("--sizes", "1M,64M", "--batch", "64M", "--reps", "3")

# Real programs first: what a user runs (issue: real training and inference
# loops); the micro workloads follow.
WORKLOADS = [
    Workload("train_loader", "py", ("--samples", "2560", "--epochs", "1"), est_s=60, est_quick_s=25),
    Workload("state_dict", "py", ("--layers", "8"), est_s=20, est_quick_s=8),
    Workload("offload", "py", ("--layers", "8", "--reps", "3"), est_s=15, est_quick_s=8),
    Workload("repeat", "cuda", ("--bytes", "256M", "--copies", "6"), est_s=12, est_quick_s=4),
    Workload("infer_readback", "py", ("--steps", "10"), est_s=15, est_quick_s=8),
    Workload("numba_copy", "py", ("--bytes", "256M"), est_s=12, est_quick_s=6),
    Workload("loader", "cuda", ("--batches", "200"), est_s=10, est_quick_s=4),
    Workload("sweep", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=3),
    Workload("sweep_shared", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=3),
    Workload("sweep_ptds", "cuda", _SWEEP_QUICK, est_s=12, est_quick_s=3),
    Workload("pipeline", "cuda", _PIPE_QUICK, est_s=8, est_quick_s=3),
    Workload("pipeline_ptds", "cuda", _PIPE_QUICK, est_s=8, est_quick_s=3),
    Workload("inference", "cuda", ("--batches", "6", "--reps", "2"), est_s=6, est_quick_s=2),
    Workload("churn", "cuda", ("--iters", "8"), ("--iters", "30"), has_pinned=False,
             est_s=4, est_quick_s=2),
    Workload("small", "cuda", ("--count", "500", "--reps", "3"), est_s=4, est_quick_s=1.5),
    Workload("small_shared", "cuda", ("--count", "500", "--reps", "3"), est_s=4, est_quick_s=1.5),
    Workload("readback", "cuda", ("--bytes", "128M"), est_s=8, est_quick_s=2),
    Workload("image2d", "cuda", ("--frames", "4", "--reps", "3"), est_s=6, est_quick_s=2),
    Workload("volume3d", "cuda", ("--volumes", "2", "--reps", "3"), est_s=6, est_quick_s=2),
    Workload("compute", "cuda", ("--launches", "50"), has_pinned=False, est_s=3, est_quick_s=1.5),
    Workload("bidir", "cuda", _BIDIR_QUICK, est_s=5, est_quick_s=2),
    Workload("bidir_ptds", "cuda", _BIDIR_QUICK, est_s=5, est_quick_s=2),
    Workload("multigpu", "cuda", _MULTIGPU_QUICK, est_s=15, est_quick_s=4),
    Workload("multigpu_procs", "cuda", _MULTIGPU_QUICK + ("--procs",), ("--procs",), est_s=15,
             est_quick_s=5, target="multigpu"),
    Workload("torch_copy", "py", ("--bytes", "256M"), est_s=15, est_quick_s=7),
    Workload("torch_expandable", "py", ("--bytes", "256M"), est_s=15, est_quick_s=7),
    Workload("tensor_batch", "py", ("--count", "256", "--reps", "3"), est_s=10, est_quick_s=6),
    Workload("torch_train", "py", ("--samples", "512", "--epochs", "2"), est_s=20, est_quick_s=10),
    Workload("cupy_copy", "py", ("--bytes", "256M"), est_s=12, est_quick_s=5),
]

BY_NAME = {w.name: w for w in WORKLOADS}


def select(spec):
    """Workloads named in a comma list ("all" or empty = every one), in the
    registry's order. Raises ValueError naming unknown ones."""
    if not spec or spec == "all":
        return list(WORKLOADS)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError("unknown workload(s): %s (known: %s)"
                         % (", ".join(unknown), ", ".join(BY_NAME)))
    return [w for w in WORKLOADS if w.name in names]
