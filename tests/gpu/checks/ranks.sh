#!/usr/bin/env bash
# pinfast run under torchrun --nproc-per-node 2 on one machine, as
# docs/cli.md tells a user to: one JSON report per rank (pf-%r-%h-%p.json),
# merged by pinfast report with a per-rank table.  Each rank copies its own
# random tensors to the GPU and back and checks them; the ranks all-reduce a
# checksum over gloo (two ranks may share one GPU).  Usage:
#   tests/gpu/checks/ranks.sh [BUILD_DIR]     exit 0: every check passed
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build=$(readlink -f "${1:-$root/build}")
pinfast="$root/tools/pinfast"
export PINFAST_LIB="$build/libpinfast.so"
work=$(mktemp -d /tmp/pinfast-ranks.XXXXXX)
cat >"$work/ddp.py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
g = torch.Generator().manual_seed(1234 + rank)
total = torch.zeros(1, dtype=torch.float64)
for step in range(8):
    x = torch.rand(1 << 24, generator=g)                 # 64 MiB, pageable
    y = x.to("cuda").mul_(2).cpu()
    if not torch.equal(y, x * 2):
        raise SystemExit(f"rank {rank}: step {step}: data differs")
    total += y.double().sum()
dist.all_reduce(total)
print(f"rank {rank} of {dist.get_world_size()}: ok, sum {total.item():.6e}", flush=True)
dist.destroy_process_group()
PY
fail=0
check() { if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi; }
cd "$work"
what="torchrun --nproc-per-node 2 under pinfast run exits 0"
check "$pinfast" run --stats-file "$work/pf-%r-%h-%p.json" -- \
    python3 -m torch.distributed.run --standalone --nproc-per-node 2 ddp.py
ls "$work"/pf-*.json 2>/dev/null | sed "s|$work/|report file: |"
what="one report per rank, named by rank and host (pf-0-*, pf-1-*), none from the launcher"
check test "$(ls pf-0-"$(hostname)"-*.json pf-1-"$(hostname)"-*.json 2>/dev/null | wc -l)" = 2 -a \
    "$(ls pf-*.json | wc -l)" = 2
"$pinfast" report pf-*.json | tee merged.txt
what="the merged report has a per-rank table with ranks 0 and 1"
check sh -c 'sed -n "/Per rank/,\$p" merged.txt | grep -Eq "^ *0 " && sed -n "/Per rank/,\$p" merged.txt | grep -Eq "^ *1 "'
what="the merged report shows staged H2D and D2H"
check sh -c 'grep -E "H2D.*staged" merged.txt >/dev/null && grep -E "D2H.*staged" merged.txt >/dev/null'
[ $fail = 0 ] && rm -rf "$work" || echo "some checks FAILED; files in $work"
exit $fail
