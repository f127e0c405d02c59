"""Statistics over repeated runs and the definition of "slower beyond noise".

Each workload run reports, per measurement, the median of its own
repetitions. The harness runs every variant several times (--runs) and
summarises those per-run medians: median, min, max, and the values.

Noise and the SLOWER mark (documented in docs/bench.md):
  spread(v)  = (max - min) / median of a variant's runs (0 with one run)
  noise      = max(noise_floor, spread(plain), spread(pinfast))
  pinfast looks slower at a measurement when its median time exceeds
  plain's median by more than `noise`. It is SLOWER when, besides, its runs
  rank above plain's beyond chance: the one-sided exact Mann-Whitney
  probability of ranks at least this far apart between two samples of one
  distribution is at most ALPHA. Otherwise it is "within noise": more runs
  could take it back.
ALPHA = 0.01 needs 5 runs of each (4 and 6, ...) whose ranges do not
overlap: all of 3 runs above all of 3 others happens by chance 1 time in 20,
of 4 above 4 1 in 70, of 5 above 5 1 in 252. A bench reports ~100
measurements, so 1 in 20 would mark some SLOWER on a machine whose runs
differ by process (the H100's small copies land in a fast or a slow mode,
docs/bench.md). The floor (default 5%) is the smallest slowdown reported.
"""
import functools
import math
import statistics

DEFAULT_NOISE_FLOOR = 0.05
ALPHA = 0.01


def summarize(values):
    """Median, min, max, count and the sorted values of a non-empty list of numbers."""
    if not values:
        raise ValueError("no values")
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values), "values": sorted(values)}


def spread(s):
    """Relative spread (max - min) / median of a summary; 0 for one run."""
    if s["runs"] < 2 or s["median"] <= 0:
        return 0.0
    return (s["max"] - s["min"]) / s["median"]


def ratio_to_plain(plain, variant):
    """Speed-up over plain: plain's median time / the variant's median time
    (above 1 = faster than plain). None when either is missing or zero."""
    if not plain or not variant or plain["median"] <= 0 or variant["median"] <= 0:
        return None
    return plain["median"] / variant["median"]


def noise(plain, variant, floor=DEFAULT_NOISE_FLOOR):
    return max(floor, spread(plain), spread(variant))


@functools.lru_cache(maxsize=None)
def _u_counts(n, m):
    """How many of the C(n+m, n) orders of n values of one sample and m of
    another give each Mann-Whitney U (pairs where the first's is larger)."""
    if n == 0 or m == 0:
        return (1,)
    # the largest value is the first sample's (beats all m) or the second's
    a, b = _u_counts(n - 1, m), _u_counts(n, m - 1)
    out = [0] * (n * m + 1)
    for k, c in enumerate(a):
        out[k + m] += c
    for k, c in enumerate(b):
        out[k] += c
    return tuple(out)


def p_slower(plain_values, variant_values):
    """One-sided exact Mann-Whitney p: the chance that the variant's runs
    outrank plain's (are slower) at least this much when both come from one
    distribution. Ties count half a pair."""
    n, m = len(variant_values), len(plain_values)
    if not n or not m:
        return 1.0
    u = sum((v > p) + 0.5 * (v == p) for v in variant_values for p in plain_values)
    counts = _u_counts(n, m)
    return sum(c for k, c in enumerate(counts) if k >= u) / math.comb(n + m, n)


def verdict(plain, variant, floor=DEFAULT_NOISE_FLOOR):
    """"slower", "within noise" or None for `variant` (times in seconds)
    against `plain`, as defined in the module docstring."""
    if not plain or not variant:
        return None
    if variant["median"] <= plain["median"] * (1 + noise(plain, variant, floor)):
        return None
    return "slower" if p_slower(plain["values"], variant["values"]) <= ALPHA else "within noise"


def is_slower(plain, variant, floor=DEFAULT_NOISE_FLOOR):
    return verdict(plain, variant, floor) == "slower"


def geomean(values):
    vals = [v for v in values if v and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def losses_match(reference, other, rel_tol=1e-4):
    """Loss lists agree element by element within rel_tol (tiny differences
    can come from nondeterministic reductions; a wrong copy shows as a large
    difference). Lengths must agree."""
    if reference is None or other is None or len(reference) != len(other):
        return False
    return all(math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-7) for a, b in zip(reference, other))
