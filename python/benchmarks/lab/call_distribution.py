#!/usr/bin/env python3
"""Per-call time distributions of one allreduce size through each path from
Python: the weft backend's blocking dist.all_reduce ("weft"), gloo's
("gloo"), weft.Comm.allreduce ("comm"), weft.Comm.iallreduce().wait()
("icomm"), dist.all_reduce(async_op=True).wait() ("async") and
.get_future().wait() ("future").

    mpiexec -n 2 python python/benchmarks/lab/call_distribution.py -m 1M,2M -i 200

For each size and path: 10 warm-up calls, then -i calls timed one by one;
each call's time is the slowest rank's. Prints the 10th, 50th, 90th and
99th percentiles, the maximum, the mean and the share of calls above 1 ms:
a median near the C library's time with a heavy tail is a scheduling
problem (a descheduled thread), a slow median is the path's own cost. An
investigation tool (doc/python.md, "Where the time went"), not a benchmark.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_torch import parse_size  # noqa: E402  (one size syntax for both programs)

VERSION = "0.1.0"
PATHS = ("weft", "gloo", "comm", "icomm", "async", "future")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="call_distribution.py",
        description="Per-call time distributions of allreduce through each Python path "
                    "(weft backend, gloo, weft.Comm). Run under mpiexec -n N.")
    p.add_argument("--version", action="version", version="%(prog)s " + VERSION)
    p.add_argument("-m", "--sizes", default="16K,1M,2M,4M",
                   help="comma list of message sizes in bytes (suffix K, M; default "
                        "16K,1M,2M,4M)")
    p.add_argument("-i", "--iterations", type=int, default=200,
                   help="timed calls per size and path (default 200)")
    p.add_argument("-p", "--paths", default=",".join(PATHS),
                   help="comma list of paths among %s (default all)" % ",".join(PATHS))
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1)")
    a = p.parse_args(argv)
    try:
        a.size_list = [parse_size(x) for x in a.sizes.split(",")]
    except ValueError:
        p.error("argument -m/--sizes: expected a comma list of sizes, got %r" % a.sizes)
    if any(n < 4 for n in a.size_list):
        p.error("argument -m/--sizes: sizes must be at least 4 bytes, got %r" % a.sizes)
    a.path_list = a.paths.split(",")
    bad = [x for x in a.path_list if x not in PATHS]
    if bad:
        p.error("argument -p/--paths: unknown path %r (expected %s)" % (bad[0], ",".join(PATHS)))
    if a.iterations < 1:
        p.error("argument -i/--iterations: must be >= 1")
    if a.threads < 1:
        p.error("argument --threads: must be >= 1")
    return a


def main(argv):
    a = parse_args(argv)  # before importing torch: usage errors are quick
    import numpy as np
    import torch
    import torch.distributed as dist
    import weft
    import weft.torch as wt

    torch.set_num_threads(a.threads)
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    comm = wt.world_comm()
    if rank == 0:
        print("# per-call times (us, slowest rank per call), %d ranks, %d calls, completion=%s"
              % (size, a.iterations, weft.COMPLETION_MODE))
        print("# %-8s %-7s %9s %9s %9s %9s %9s %9s %6s" % (
            "Size", "path", "p10", "p50", "p90", "p99", "max", "mean", ">1ms"))
    for nb in a.size_list:
        t = torch.ones(nb // 4)
        x = np.ones(nb // 4, dtype=np.float32)
        fns = {"weft": lambda: dist.all_reduce(t),
               "gloo": lambda: dist.all_reduce(t, group=gloo),
               "comm": lambda: comm.allreduce(x),
               "icomm": lambda: comm.iallreduce(x).wait(),
               "async": lambda: dist.all_reduce(t, async_op=True).wait(),
               "future": lambda: dist.all_reduce(t, async_op=True).get_future().wait()}
        for path in a.path_list:
            fn = fns[path]
            for _ in range(10):
                fn()
            comm.barrier()
            ts = np.empty(a.iterations)
            for i in range(a.iterations):
                t0 = time.perf_counter()
                fn()
                ts[i] = time.perf_counter() - t0
            per_call = np.zeros((size, a.iterations))
            per_call[rank] = ts * 1e6
            comm.allreduce(per_call)
            v = per_call.max(axis=0)
            if rank == 0:
                print("%-10d %-7s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %5.0f%%" % (
                    nb, path, *np.percentile(v, [10, 50, 90, 99]), v.max(), v.mean(),
                    100.0 * (v > 1000).mean()))
                sys.stdout.flush()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
