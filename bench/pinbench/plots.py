"""PNG plots (matplotlib is optional: without it the harness says so and
goes on). bandwidth(): GB/s against size for the sweep workloads, one figure
per direction, one line per variant (solid: sync copies, dashed: async,
dotted: fresh destination). speedup(): per workload measurement, the
geometric mean over sizes of the speed-up over plain, for pinfast and
pinned."""
from . import stats

COLORS = {"plain": "tab:gray", "pinfast": "tab:blue", "pinned": "tab:green"}
STYLES = {"sync": "-", "async": "--", "fresh": ":"}


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _plt():
    import matplotlib
    matplotlib.use("Agg")  # no display on the GPU machine
    import matplotlib.pyplot as plt
    return plt


def bandwidth(records, path_prefix, workload="sweep"):
    """Writes <prefix>-<workload>-H2D.png and -D2H.png; returns the paths."""
    plt = _plt()
    paths = []
    for direction in ("H2D", "D2H"):
        series = {}
        for r in records:
            if r["workload"] != workload or r["direction"] != direction or r.get("gbps") is None:
                continue
            series.setdefault((r["variant"], r["name"]), []).append((r["bytes"], r["gbps"]))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(8, 5))
        for (variant, name), pts in sorted(series.items()):
            pts.sort()
            style = STYLES.get(name.split("_")[-1], "-")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", markersize=3,
                    color=COLORS.get(variant), label="%s %s" % (variant, name))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per copy")
        ax.set_ylabel("GB/s")
        ax.set_title("%s %s bandwidth" % (workload, direction))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        path = "%s-%s-%s.png" % (path_prefix, workload, direction)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def speedup_rows(records):
    """[(label, {variant: geometric-mean ratio})] per workload measurement."""
    acc = {}
    for r in records:
        if r["variant"] == "plain" or r.get("ratio_to_plain") is None:
            continue
        acc.setdefault("%s %s" % (r["workload"], r["name"]), {}).setdefault(r["variant"], []).append(r["ratio_to_plain"])
    return [(label, {v: stats.geomean(x) for v, x in vs.items()}) for label, vs in acc.items()]


def speedup(records, path):
    plt = _plt()
    rows = speedup_rows(records)
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(rows) + 1.5))
    h = 0.4
    for i, variant in enumerate(("pinfast", "pinned")):
        ys = [j + i * h for j in range(len(rows))]
        xs = [vs.get(variant) or 0 for _, vs in rows]
        ax.barh(ys, xs, height=h, color=COLORS[variant], label=variant)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([j + h / 2 for j in range(len(rows))])
    ax.set_yticklabels([label for label, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter
    fmt = FuncFormatter(lambda x, _pos: "%gx" % x)
    ax.xaxis.set_major_formatter(fmt)
    ax.xaxis.set_minor_formatter(fmt)
    ax.tick_params(axis="x", which="minor", labelsize=6)
    ax.set_xlabel("speed-up over plain (median time ratio, geometric mean over sizes)")
    ax.legend()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [path]
