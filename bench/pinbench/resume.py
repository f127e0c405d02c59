"""Taking up an earlier run (--resume): the workloads it ran to the end are
kept, the others are run now. A workload it stopped in keeps its complete
rounds (run k of every variant) only when the earlier run was on this same
start of the machine (its boot id); else it runs again whole, so that a
workload's variants are always compared within one start of the machine.
The earlier run must have used the same library, the same sizes and as
many busy processes (--busy)."""
import json
import os

from . import results


def _sibling(raw_path):
    """The earlier run's results file, which names its library."""
    if not raw_path.endswith("-raw.jsonl"):
        return None
    return raw_path[:-len("-raw.jsonl")] + ".jsonl"


def read(raw_path, quick, busy=0):
    """The earlier run's runs, the digest of its library and its machine
    start, or (None, why) when it cannot be taken up: checked before
    anything runs."""
    sibling = _sibling(raw_path)
    if sibling is None:
        return None, "not a file of raw runs (<stem>-raw.jsonl)"
    try:
        with open(raw_path) as f:
            old = [json.loads(line) for line in f if line.strip()]
        with open(sibling) as f:
            first = json.loads(f.readline() or "{}")
    except (OSError, ValueError) as e:
        return None, str(e)
    if bool(first.get("quick")) != bool(quick):
        return None, "it ran the %s sizes" % ("quick" if first.get("quick") else "full")
    if int(first.get("busy", 0)) != busy:
        return None, "it ran beside %d busy process(es), this run %d" % (int(first.get("busy", 0)), busy)
    return (old, first.get("lib_sha256"), first.get("boot_id")), None


def keep(earlier, selected, runs, lib_digest, boot_id):
    """(kept runs, names of the workloads kept whole, {name: rounds kept} of
    those kept in part, None), or (None, None, None, why) when the earlier
    run's library is not this one.  A part is its rounds from the first on,
    each with every variant's run, and only from this machine start."""
    old, digest, their_boot = earlier
    if digest != lib_digest:
        return None, None, None, "its library (%s) is not this one (%s)" % (digest, lib_digest)
    have = {}
    for r in old:
        if r.get("run", -1) < runs and results.run_ok(r):
            have[(r["workload"], r["variant"], r["run"])] = r
    same_start = boot_id is not None and their_boot == boot_id
    kept, names, rounds = [], [], {}
    for w in selected:
        done = 0
        while done < runs and all((w.name, v, done) in have for v in w.variants()):
            done += 1
        if done == runs:
            names.append(w.name)
        elif done and same_start:
            rounds[w.name] = done
        else:
            continue
        kept += [have[(w.name, v, k)] for k in range(done) for v in w.variants()]
    return kept, names, rounds, None


def describe(raw_path, names, rounds):
    """The results table's line on what was taken up."""
    parts = ["runs of %s" % ", ".join(names)] if names else []
    parts += ["the first %d round(s) of %s (this machine start)" % (n, w) for w, n in rounds.items()]
    what = "; ".join(parts)
    return ("%s taken up from %s (--resume); the others ran now.\n\n"
            % (what[0].upper() + what[1:], os.path.basename(raw_path)))
