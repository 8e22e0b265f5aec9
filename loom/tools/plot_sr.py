#!/usr/bin/env python3
"""Plot a `loom train --model edsr --metrics FILE` CSV: the training L1 per
progress interval and the held-out L1 per epoch (left), the held-out PSNR
on Y of EDSR per epoch against bicubic upscaling of the same inputs (right).

usage: plot_sr.py METRICS.csv OUT.png [--title TEXT]

Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("out")
    ap.add_argument("--title", default="EDSR x2 (baseline)")
    a = ap.parse_args()
    train, test = [], []
    with open(a.csv, newline="") as f:
        for row in csv.DictReader(f):
            (train if row["kind"] == "train" else test).append(row)
    if not train or "psnr_y" not in train[0]:
        sys.exit(f"{a.csv}: not an EDSR metrics file with training rows")
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_sr.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot([int(r["step"]) for r in train], [float(r["loss"]) for r in train],
             label="train L1 (interval mean)", lw=1)
    if test:
        ax1.plot([int(r["step"]) for r in test], [float(r["loss"]) for r in test], "o-",
                 label="held-out L1")
    ax1.set_xlabel("step")
    ax1.set_ylabel("L1 (pixel values in [0, 1])")
    ax1.set_yscale("log")
    ax1.grid(alpha=0.3)
    ax1.legend()
    if test:
        steps = [int(r["step"]) for r in test]
        ax2.plot(steps, [float(r["psnr_y"]) for r in test], "o-", label="EDSR")
        ax2.plot(steps, [float(r["psnr_bicubic"]) for r in test], "--", label="bicubic")
        last = test[-1]
        ax2.annotate("%+.2f dB" % (float(last["psnr_y"]) - float(last["psnr_bicubic"])),
                     (steps[-1], float(last["psnr_y"])), textcoords="offset points",
                     xytext=(-45, -16))
    ax2.set_xlabel("step")
    ax2.set_ylabel("PSNR on Y, held-out (dB)")
    ax2.grid(alpha=0.3)
    ax2.legend()
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
