#!/usr/bin/env python3
"""Draws a pinfast Chrome trace (PINFAST_TRACE_FORMAT=chrome) as an SVG
picture: one row per thread (the callers, the DMA tracks, the workers), each
complete event a bar, a copy's bar labelled with its API and size.  Only the
standard library, so it runs where the trace was made.

    tools/trace2svg.py trace.json out.svg [--from US] [--to US]
"""
import argparse
import html
import json

COLOURS = {"DMA": "#d62728", "host copy": "#2ca02c", "staged": "#1f77b4", "passthrough": "#7f7f7f"}
ROW, LEFT, WIDTH = 22, 170, 1100


def colour(e):
    return COLOURS.get(e["name"]) or COLOURS.get(e.get("args", {}).get("path"), "#9467bd")


def size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from", dest="start", type=float, help="first microsecond drawn")
    ap.add_argument("--to", dest="end", type=float, help="last microsecond drawn")
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    bars = [e for e in events if e.get("ph") == "X"
            and (a.start is None or e["ts"] + e["dur"] >= a.start)
            and (a.end is None or e["ts"] <= a.end)]
    if not bars:
        raise SystemExit("trace2svg: no events to draw")
    t0 = a.start if a.start is not None else min(e["ts"] for e in bars)
    t1 = a.end if a.end is not None else max(e["ts"] + e["dur"] for e in bars)
    scale = WIDTH / max(t1 - t0, 1e-3)
    # callers first (by thread id), then pinfast's own tracks
    rows = sorted({(e["pid"], e["tid"]) for e in bars}, key=lambda r: ((r in names), r))
    row = {r: i for i, r in enumerate(rows)}
    height = ROW * (len(rows) + 2)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 10}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>']
    for r, i in row.items():
        label = names.get(r, f"thread {r[1]}")
        out.append(f'<text x="4" y="{ROW * i + 15}">{html.escape(label)}</text>')
    for e in bars:
        x = LEFT + max(e["ts"] - t0, 0) * scale
        w = max(min(e["ts"] + e["dur"], t1) - max(e["ts"], t0), 0) * scale
        y = ROW * row[(e["pid"], e["tid"])] + 3
        args = e.get("args", {})
        tip = f'{e["name"]} {size(args.get("bytes", 0))} {e["dur"]:.1f} us'
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{max(w, 0.5):.2f}" height="{ROW - 6}" '
                   f'fill="{colour(e)}"><title>{html.escape(tip)}</title></rect>')
        if w > 90 and e["name"] not in ("DMA", "host copy"):
            out.append(f'<text x="{x + 3:.2f}" y="{y + 12}" fill="white">'
                       f'{html.escape(e["name"] + " " + size(args.get("bytes", 0)))}</text>')
    y = ROW * len(rows) + 16
    out.append(f'<text x="4" y="{y}">{t1 - t0:.0f} us from {t0:.0f} us; '
               'blue: staged copy, grey: passed through, red: DMA, green: host copy</text>')
    out.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
