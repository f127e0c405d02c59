"""Several GPUs at once (the multigpu workloads): the aggregate bandwidth of
all GPUs copying together against GPU 0 alone in the same run.

A workload that reports, per direction and size, a measurement "single"
(GPU 0 alone, bytes = one copy) and "all" (every GPU at once, bytes = one
copy x GPUs, params["gpus"] GPUs) gets one scaling row per variant:
ratio = all GB/s / single GB/s, 2.0 being perfect scaling on two GPUs.
The floor is FLOOR_PER_GPU x GPUs (1.7x on two GPUs); a row with two
or more GPUs under it is marked BELOW. It is reported, not an exit status:
the plain path may well not scale, and a machine's topology can cap it.
"""
from . import results

FLOOR_PER_GPU = 0.85


def rows(records):
    """Scaling rows, in the order the "all" records appear: dicts with
    workload, variant, direction, bytes (one copy), gpus, single_gbps,
    all_gbps, ratio, floor, below."""
    single = {}
    for r in records:
        if r["name"] == "single" and r.get("gbps"):
            single[(r["workload"], r["variant"], r["direction"], r["bytes"])] = r
    out = []
    for r in records:
        gpus = (r.get("params") or {}).get("gpus")
        if r["name"] != "all" or not gpus or not r.get("gbps"):
            continue
        one = single.get((r["workload"], r["variant"], r["direction"], r["bytes"] // gpus))
        if one is None:
            continue
        ratio = r["gbps"] / one["gbps"]
        floor = FLOOR_PER_GPU * gpus
        out.append({"workload": r["workload"], "variant": r["variant"], "direction": r["direction"],
                    "bytes": one["bytes"], "gpus": gpus, "single_gbps": one["gbps"],
                    "all_gbps": r["gbps"], "ratio": ratio, "floor": floor,
                    "below": gpus >= 2 and ratio < floor})
    return out


def below(scaling_rows, variant="pinfast"):
    return [s for s in scaling_rows if s["below"] and s["variant"] == variant]


def markdown_table(scaling_rows):
    """The scaling rows as a markdown section; empty text when there are none."""
    if not scaling_rows:
        return ""
    lines = ["## Several GPUs: all at once against GPU 0 alone", "",
             "| workload | variant | dir | size per GPU | GPUs | GPU 0 alone | all GPUs | ratio | mark |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in scaling_rows:
        lines.append("| %s | %s | %s | %s | %d | %.2f GB/s | %.2f GB/s | %.2fx | %s |" % (
            s["workload"], s["variant"], s["direction"], results.fmt_size(s["bytes"]), s["gpus"],
            s["single_gbps"], s["all_gbps"], s["ratio"],
            "**BELOW %.2fx**" % s["floor"] if s["below"] else ""))
    return "\n".join(lines) + "\n"
