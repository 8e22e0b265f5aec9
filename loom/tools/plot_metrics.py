#!/usr/bin/env python3
"""Plot a `loom train --metrics FILE` CSV: training loss and accuracy per
progress interval, test loss and accuracy per epoch.

usage: plot_metrics.py METRICS.csv OUT.png|OUT.svg [--title TEXT]

A .png needs matplotlib (Debian: python3-matplotlib); a .svg is written
with the standard library alone, so it works with any python3.
The mesh model's CSV (precision and recall columns) plots precision.
"""
import argparse
import csv
import math
import sys


def load(path):
    train, test = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            (train if row["kind"] == "train" else test).append(row)
    if not train:
        sys.exit(f"{path}: no training rows")
    return train, test


def metric_name(rows):
    return "accuracy" if "accuracy" in rows[0] else "precision"


def epochs(train, test):
    # steps per epoch, to put both series on an epoch axis
    last_step = {}
    for r in train:
        last_step[int(r["epoch"])] = int(r["step"])
    spe = max(1, last_step[min(last_step)])
    return lambda r: int(r["step"]) / spe


def png(a, train, test):
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_metrics.py: matplotlib is not installed (Debian: apt-get install "
                 "python3-matplotlib); write an SVG instead, which needs nothing: "
                 f"plot_metrics.py {a.csv} {a.out.rsplit('.', 1)[0]}.svg")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep, key = epochs(train, test), metric_name(train)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot([ep(r) for r in train], [float(r["loss"]) for r in train], label="train (interval mean)", lw=1)
    if test:
        ax1.plot([ep(r) for r in test], [float(r["loss"]) for r in test], "o-", label="test")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss")
    ax1.set_yscale("log")
    ax1.grid(alpha=0.3)
    ax1.legend()
    ax2.plot([ep(r) for r in train], [100 * float(r[key]) for r in train], label="train (interval)", lw=1)
    if test:
        ax2.plot([ep(r) for r in test], [100 * float(r[key]) for r in test], "o-", label="test")
        final = test[-1]
        ax2.annotate(f"final {100 * float(final[key]):.2f}%", (ep(final), 100 * float(final[key])),
                     textcoords="offset points", xytext=(-70, -25))
    ax2.set_xlabel("epoch")
    ax2.set_ylabel(f"{key} (%)")
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


def svg(a, train, test):
    ep, key = epochs(train, test), metric_name(train)
    W, H, M = 440, 300, 50
    parts = []

    def panel(x0, title, series, logy):
        ys = [y for _, pts, _ in series for _, y in pts if not logy or y > 0]
        xs = [x for _, pts, _ in series for x, _ in pts]
        if not ys:
            return
        f = (lambda v: math.log10(v)) if logy else (lambda v: v)
        y0, y1 = min(map(f, ys)), max(map(f, ys))
        x1 = max(xs) or 1
        if y1 == y0:
            y1 = y0 + 1
        sx = lambda x: x0 + M + (W - 2 * M) * x / x1
        sy = lambda y: H - M - (H - 2 * M) * (f(y) - y0) / (y1 - y0)
        parts.append(f'<rect x="{x0 + M}" y="{M}" width="{W - 2 * M}" height="{H - 2 * M}" '
                     'fill="none" stroke="#888"/>')
        parts.append(f'<text x="{x0 + W / 2}" y="{M - 10}" text-anchor="middle">{title}</text>')
        parts.append(f'<text x="{x0 + W / 2}" y="{H - 12}" text-anchor="middle">epoch (0 .. {x1:.3g})</text>')
        lo, hi = (10 ** y0, 10 ** y1) if logy else (y0, y1)
        parts.append(f'<text x="{x0 + 4}" y="{H - M}">{lo:.3g}</text><text x="{x0 + 4}" y="{M + 10}">{hi:.3g}</text>')
        for i, (name, pts, colour) in enumerate(series):
            pts = [(x, y) for x, y in pts if not logy or y > 0]
            d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            parts.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
            parts.append(f'<text x="{x0 + M + 8}" y="{M + 16 + 14 * i}" fill="{colour}">{name}</text>')

    loss = [("train", [(ep(r), float(r["loss"])) for r in train], "#1f77b4")]
    acc = [("train", [(ep(r), 100 * float(r[key])) for r in train], "#1f77b4")]
    if test:
        loss.append(("test", [(ep(r), float(r["loss"])) for r in test], "#d62728"))
        acc.append(("test", [(ep(r), 100 * float(r[key])) for r in test], "#d62728"))
    panel(0, "loss (log scale)", loss, True)
    panel(W, f"{key} (%)", acc, False)
    title = f'<text x="{W}" y="16" text-anchor="middle">{a.title}</text>' if a.title else ""
    with open(a.out, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H}" '
                f'font-family="sans-serif" font-size="12">{title}{"".join(parts)}</svg>\n')


def main():
    p = argparse.ArgumentParser(description="Plot a loom train --metrics CSV (PNG with matplotlib, SVG without).")
    p.add_argument("csv")
    p.add_argument("out", help="OUT.png (matplotlib) or OUT.svg (no dependency)")
    p.add_argument("--title", default="")
    a = p.parse_args()
    train, test = load(a.csv)
    if a.out.endswith(".svg"):
        svg(a, train, test)
    else:
        png(a, train, test)
    if test:
        key = metric_name(test)
        print(f"test {key}: final {100 * float(test[-1][key]):.2f}% "
              f"best {100 * max(float(r[key]) for r in test):.2f}%")


if __name__ == "__main__":
    main()
