"""Taking up an earlier run (--resume): the workloads it ran to the end are
kept, the others are run now. A workload is kept whole or run again whole,
so that its variants are always compared within one run of the machine.
The earlier run must have used the same library and the same sizes."""
import json
import os

from . import results


def _sibling(raw_path):
    """The earlier run's results file, which names its library."""
    if not raw_path.endswith("-raw.jsonl"):
        return None
    return raw_path[:-len("-raw.jsonl")] + ".jsonl"


def read(raw_path, quick):
    """The earlier run's runs and the digest of its library, or (None, why)
    when it cannot be taken up: checked before anything runs."""
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
    return (old, first.get("lib_sha256")), None


def keep(earlier, selected, runs, lib_digest):
    """(kept runs, names of the workloads kept, None), or (None, None, why)
    when the earlier run's library is not this one."""
    old, digest = earlier
    if digest != lib_digest:
        return None, None, "its library (%s) is not this one (%s)" % (digest, lib_digest)
    have = {}
    for r in old:
        if r.get("run", -1) < runs and results.run_ok(r):
            have[(r["workload"], r["variant"], r["run"])] = r
    kept, names = [], []
    for w in selected:
        want = [(w.name, v, k) for k in range(runs) for v in w.variants()]
        if all(key in have for key in want):
            kept += [have[key] for key in want]
            names.append(w.name)
    return kept, names, None


def describe(raw_path, names):
    """The results table's line on what was taken up."""
    return ("Runs of %s taken up from %s (--resume); the others ran now.\n\n"
            % (", ".join(names), os.path.basename(raw_path)))
