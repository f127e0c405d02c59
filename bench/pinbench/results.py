"""From raw runs to records: grouping per measurement, medians across runs,
ratios to plain, the SLOWER and loss-mismatch marks, JSON lines and the
markdown table.

A raw run is a dict: workload, variant, run (index), rc, output (the
workload's parsed JSON line or None), error (text), wall_s, stats_files,
cpu_s and maxrss_mb (the whole process's CPU time and peak RSS, each run).
A measurement is identified within a workload by (name, direction, bytes).
"""
import json

from . import stats

VARIANTS = ("plain", "pinfast", "pinned")


def key_of(m):
    return (m.get("name"), m.get("direction"), m.get("bytes", 0))


def run_ok(run):
    out = run.get("output")
    return run.get("rc") == 0 and isinstance(out, dict) and "measurements" in out


def aggregate(runs, machine, date, noise_floor=stats.DEFAULT_NOISE_FLOOR, extra=None):
    """Returns (records, problems, skipped).

    records: one dict per (workload, measurement, variant), in the order the
    measurements first appear. problems: human-readable failure lines (a
    failed run, wrong losses); each makes the harness exit non-zero.
    skipped: {workload: reason}."""
    records, problems, skipped = [], [], {}
    by_workload = {}
    for r in runs:
        by_workload.setdefault(r["workload"], []).append(r)

    for wl, wruns in by_workload.items():
        for r in wruns:
            out = r.get("output")
            if isinstance(out, dict) and out.get("skipped"):
                skipped[wl] = out["skipped"]
            elif not run_ok(r):
                problems.append("FAILED %s %s run %d: rc=%s %s"
                                % (wl, r["variant"], r["run"], r.get("rc"), (r.get("error") or "").strip()[-300:]))
        if wl in skipped:
            continue

        # key -> variant -> list of per-run measurement dicts
        table, order, params, usage = {}, [], {}, {}
        for r in wruns:
            if not run_ok(r):
                continue
            params.setdefault(r["variant"], r["output"].get("params", {}))
            usage.setdefault(r["variant"], []).append((r.get("cpu_s"), r.get("maxrss_mb")))
            for m in r["output"]["measurements"]:
                k = key_of(m)
                if k not in table:
                    table[k] = {}
                    order.append(k)
                table[k].setdefault(r["variant"], []).append(m)

        for k in order:
            summaries = {v: stats.summarize([m["seconds"] for m in ms]) for v, ms in table[k].items()}
            plain = summaries.get("plain")
            ref_losses = None
            if "plain" in table[k]:
                ref_losses = table[k]["plain"][0].get("losses")
            for v in VARIANTS:
                if v not in summaries:
                    continue
                s, ms = summaries[v], table[k][v]
                first = ms[0]
                rec = {"machine": machine, "date": date, "workload": wl, "name": k[0],
                       "variant": v, "direction": k[1], "bytes": k[2],
                       "seconds": s["median"], "min_s": s["min"], "max_s": s["max"], "runs": s["runs"],
                       "runs_s": s["values"]}
                if k[2] and s["median"] > 0:
                    rec["gbps"] = k[2] / s["median"] / 1e9
                if first.get("unit"):
                    rec["unit"] = first["unit"]
                    rec["items"] = first.get("items")
                    rec["rate"] = first["items"] / s["median"] if s["median"] > 0 else None
                rec["ratio_to_plain"] = stats.ratio_to_plain(plain, s)
                if v == "pinfast":
                    rec["noise"] = stats.noise(plain, s, noise_floor) if plain else None
                    rec["p_slower"] = stats.p_slower(plain["values"], s["values"]) if plain else None
                    judged = stats.verdict(plain, s, noise_floor)
                    rec["slower"] = judged == "slower"
                    rec["within_noise"] = judged == "within noise"
                if ref_losses is not None:
                    rec["losses"] = [m.get("losses") for m in ms]
                    rec["losses_match"] = all(stats.losses_match(ref_losses, m.get("losses")) for m in ms)
                    if not rec["losses_match"]:
                        problems.append("MISMATCH %s %s %s: losses differ from plain's" % (wl, k[0], v))
                if first.get("loss_hash") is not None:
                    bitwise(rec, table[k], ms, v, problems, wl, k[0])
                rec["params"] = params.get(v, {})
                rec["process_cpu_s"] = [u[0] for u in usage.get(v, [])]
                rec["process_maxrss_mb"] = [u[1] for u in usage.get(v, [])]
                if extra:
                    rec.update(extra)
                records.append(rec)
    return records, problems, skipped


def bitwise(rec, variants, ms, v, problems, wl, name):
    """A workload that hashes its losses (ddp_train): each run's hash, and
    whether all are plain's. pinfast must give bitwise plain's losses (a
    problem otherwise); plain's own runs must agree, or the check says
    nothing (a problem of the workload: it is not deterministic)."""
    rec["loss_hashes"] = [m.get("loss_hash") for m in ms]
    plain = {m.get("loss_hash") for m in variants.get("plain", [])}
    if len(plain) != 1:
        rec["loss_hash_match"] = None
        if v == "plain" and plain:
            problems.append("NONDETERMINISTIC %s %s: plain's runs hash their losses %d ways"
                            % (wl, name, len(plain)))
        return
    rec["loss_hash_match"] = set(rec["loss_hashes"]) == plain
    if v == "pinfast" and not rec["loss_hash_match"]:
        problems.append("MISMATCH %s %s pinfast: losses not bitwise plain's (hash %s, plain %s)"
                        % (wl, name, ",".join(map(str, rec["loss_hashes"])), plain.pop()))


def slower_records(records):
    return [r for r in records if r.get("slower")]


def within_noise_records(records):
    """pinfast measurements slower by more than the noise, by too few runs to tell."""
    return [r for r in records if r.get("within_noise")]


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def fmt_size(n):
    if not n:
        return ""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    if n >= 1 << 20:
        return "%.1f MiB" % (n / (1 << 20))
    return "%d B" % n


def fmt_value(rec):
    """The headline number of a record: GB/s for transfers, a rate for
    workloads that count items, else milliseconds."""
    if rec is None:
        return "-"
    if rec.get("unit") and rec.get("rate"):
        return "%.4g %s/s" % (rec["rate"], rec["unit"])
    if rec.get("gbps") is not None:
        return "%.2f GB/s" % rec["gbps"]
    return "%.3g ms" % (rec["seconds"] * 1e3)


def fmt_ratio(r):
    return "-" if r is None else "%.2fx" % r


def markdown_table(records, problems=(), skipped=None):
    """One row per workload measurement; the pinfast and pinned columns show
    the speed-up over plain (median time ratio); SLOWER marks a slowdown
    beyond noise, "within noise" one that more runs could take back,
    MISMATCH wrong losses."""
    lines = ["| workload | measurement | dir | size | plain | pinfast | pinned | pinfast vs plain | pinned vs plain | mark |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    rows = {}
    for r in records:
        rows.setdefault((r["workload"], r["name"], r["direction"], r["bytes"]), {})[r["variant"]] = r
    for (wl, name, direction, nbytes), vs in rows.items():
        pf, pn = vs.get("pinfast"), vs.get("pinned")
        marks = []
        if pf and pf.get("slower"):
            marks.append("**SLOWER**")
        elif pf and pf.get("within_noise"):
            marks.append("within noise")
        if any(v.get("losses_match") is False for v in vs.values()) or \
                (pf and pf.get("loss_hash_match") is False):
            marks.append("**MISMATCH**")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            wl, name, direction or "", fmt_size(nbytes), fmt_value(vs.get("plain")), fmt_value(pf),
            fmt_value(pn), fmt_ratio(pf and pf.get("ratio_to_plain")),
            fmt_ratio(pn and pn.get("ratio_to_plain")), " ".join(marks)))
    for wl, why in (skipped or {}).items():
        lines.append("| %s | skipped: %s | | | | | | | | |" % (wl, why))
    out = "\n".join(lines) + "\n"
    if problems:
        out += "\n" + "\n".join("- " + p for p in problems) + "\n"
    return out
