"""Statistics over repeated runs and the definition of "slower beyond noise".

Each workload run reports, per measurement, the median of its own
repetitions. The harness runs every variant several times (--runs) and
summarises those per-run medians: median, min, max.

Noise and the SLOWER mark (documented in docs/bench.md):
  spread(v)  = (max - min) / median of a variant's runs (0 with one run)
  noise      = max(noise_floor, spread(plain), spread(pinfast))
  pinfast is SLOWER at a measurement when both hold:
    - its median time exceeds plain's median by more than `noise`, and
    - its fastest run is slower than plain's slowest run (the ranges do not
      overlap), so that a single outlier cannot raise the mark.
The floor (default 5%) covers run-to-run jitter that three runs cannot show.
"""
import math
import statistics

DEFAULT_NOISE_FLOOR = 0.05


def summarize(values):
    """Median, min, max and count of a non-empty list of numbers."""
    if not values:
        raise ValueError("no values")
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values)}


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


def is_slower(plain, variant, floor=DEFAULT_NOISE_FLOOR):
    """True when `variant` (times in seconds) is slower than `plain` beyond
    noise, as defined in the module docstring."""
    if not plain or not variant:
        return False
    too_slow = variant["median"] > plain["median"] * (1 + noise(plain, variant, floor))
    disjoint = variant["min"] > plain["max"]
    return too_slow and disjoint


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
