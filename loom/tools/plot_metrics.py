#!/usr/bin/env python3
"""Plot a `loom train --metrics FILE` CSV: training loss and accuracy per
progress interval, test loss and accuracy per epoch.

usage: plot_metrics.py METRICS.csv OUT.png [--title TEXT]
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("png")
    p.add_argument("--title", default="")
    a = p.parse_args()
    train, test = [], []
    with open(a.csv, newline="") as f:
        for row in csv.DictReader(f):
            (train if row["kind"] == "train" else test).append(row)
    if not train:
        sys.exit(f"{a.csv}: no training rows")
    # steps per epoch, to put both series on an epoch axis
    last_step = {}
    for r in train:
        last_step[int(r["epoch"])] = int(r["step"])
    spe = last_step[min(last_step)]

    def ep(r):
        return int(r["step"]) / spe

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot([ep(r) for r in train], [float(r["loss"]) for r in train], label="train (interval mean)", lw=1)
    if test:
        ax1.plot([ep(r) for r in test], [float(r["loss"]) for r in test], "o-", label="test")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("cross-entropy loss")
    ax1.set_yscale("log")
    ax1.grid(alpha=0.3)
    ax1.legend()
    ax2.plot([ep(r) for r in train], [100 * float(r["accuracy"]) for r in train], label="train (interval)", lw=1)
    if test:
        ax2.plot([ep(r) for r in test], [100 * float(r["accuracy"]) for r in test], "o-", label="test")
        best = max(test, key=lambda r: float(r["accuracy"]))
        final = test[-1]
        ax2.annotate(f"final {100 * float(final['accuracy']):.2f}%", (ep(final), 100 * float(final["accuracy"])),
                     textcoords="offset points", xytext=(-70, -25))
        ax2.axhline(91, color="gray", ls="--", lw=0.8)
        print(f"test accuracy: final {100 * float(final['accuracy']):.2f}% best {100 * float(best['accuracy']):.2f}%")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_ylim(60, 100)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="lower right")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
