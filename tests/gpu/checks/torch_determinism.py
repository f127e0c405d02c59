"""A deterministic PyTorch training run whose every loss must be bitwise the
same with and without pinfast.

Fixed seeds, deterministic algorithms, a small MLP trained with Adam for
STEPS steps on random batches made on the CPU (pageable tensors) and moved
with .to('cuda') (4 MiB per batch, so pinfast stages them); every loss is read
back with .item(), and every fifth step the logits come back with .cpu()
(the batch's 640 KiB).  Each loss is printed as float.hex, then a digest of
the final parameters read back with .cpu().  Exit 77 when there is no torch
or no GPU (the caller counts it as skipped).
"""
import hashlib
import os
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before torch loads cuBLAS

try:
    import torch
except ImportError:
    print("SKIP torch_determinism: torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP torch_determinism: no GPU")
    sys.exit(77)

STEPS = int(os.environ.get("TORCH_STEPS", "30"))
BATCH, DIM, HIDDEN, CLASSES = 1024, 1024, 2048, 160

torch.manual_seed(1234)
torch.cuda.manual_seed_all(1234)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
torch.backends.cuda.matmul.allow_tf32 = False

model = torch.nn.Sequential(
    torch.nn.Linear(DIM, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
    torch.nn.Linear(HIDDEN, CLASSES),
).to("cuda")
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.Generator().manual_seed(99)  # CPU generator: pageable batches

for step in range(STEPS):
    x = torch.randn(BATCH, DIM, generator=data)
    y = torch.randint(0, CLASSES, (BATCH,), generator=data)
    xd, yd = x.to("cuda"), y.to("cuda")
    logits = model(xd)
    loss = torch.nn.functional.cross_entropy(logits, yd)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    line = f"step {step} loss {loss.item().hex()}"
    if step % 5 == 0:
        line += " logits " + hashlib.sha256(logits.detach().cpu().numpy().tobytes()).hexdigest()[:16]
    print(line, flush=True)

h = hashlib.sha256()
for p in model.parameters():
    h.update(p.detach().cpu().numpy().tobytes())
print(f"parameters {h.hexdigest()}")
print(f"torch_determinism: {STEPS} steps, torch {torch.__version__}")
