#!/usr/bin/env python3
"""Allreduce from PyTorch through the weft backend and through gloo, in the
same run, and a DDP training step on each.

    mpiexec -n 2 python python/benchmarks/bench_torch.py [-m 4:67108864] [--csv out.csv]

Per message size (float32 elements, bytes as OSU prints them), a blocking
dist.all_reduce on each backend, timed call by call in rounds that
alternate weft and gloo at each size (so that a burst of load from
elsewhere on a shared machine hits both), after 10 warm-up calls per round.
The table shows each backend's median call (each rank's median over all its
rounds' calls, then the maximum over the ranks) and, beside it, the mean
(the same calls' average: what OSU prints, and what a stray descheduled
call moves). At the small sizes it also times the weft backend's
nonblocking forms, async_op=True then work.wait() ("wait") and then
get_future().wait() ("future": the completion callback's path), and the
same allreduce through weft.Comm (numpy) and a bare ctypes call of
weft_allreduce, which show what the Python layers add (medians).

Then DDP training steps (forward, backward with DDP's bucketed allreduce,
SGD) on 28x28 inputs with each backend, for a small CNN (compute-bound) and
a wide MLP (5.8 M parameters: communication-bound), in rounds alternating
the backends: median and mean step (the maximum over the ranks of each
step), and the process's CPU time per step (every thread: what a
backend's threads take from training on a fully used machine). torch's
intra-op threads are set to 1 (--threads) for both backends, so that the
ranks' computations do not fight over the cores. Header lines start with
'#'.
"""

import argparse
import ctypes
import resource
import sys
import time

VERSION = "0.1.0"


def parse_size(s):
    mult = 1
    if s[-1:] in "kK":
        mult, s = 1024, s[:-1]
    elif s[-1:] in "mM":
        mult, s = 1 << 20, s[:-1]
    return int(s) * mult


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench_torch.py",
        description="Allreduce and DDP step time from PyTorch: the weft backend against gloo "
                    "in the same run. Run under mpiexec -n N.")
    p.add_argument("--version", action="version", version="%(prog)s " + VERSION)
    p.add_argument("-m", "--sizes", default="4:67108864",
                   help="message sizes MIN:MAX in bytes, doubling (default 4:64M)")
    p.add_argument("-i", "--iterations", type=int, default=0,
                   help="iterations per size (default: from 1000 at 4 B down to 5 at 64 MiB)")
    p.add_argument("-r", "--repeats", type=int, default=3,
                   help="timed rounds per size (and of DDP steps), weft and gloo "
                        "alternating; medians and means are over every round's calls "
                        "(default 3)")
    p.add_argument("--csv", default=None, help="also write the table as CSV to this file")
    p.add_argument("--ddp-steps", type=int, default=30,
                   help="DDP steps timed per backend and round (after 3 warm-up steps; "
                        "0: none)")
    p.add_argument("--batch", type=int, default=64, help="DDP batch per rank (default 64)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads per rank, both backends (default 1)")
    p.add_argument("--layer-max", default="4096",
                   help="largest size that also times weft.Comm and bare ctypes (default 4096)")
    a = p.parse_args(argv)
    try:
        lo, hi = (parse_size(x) for x in a.sizes.split(":"))
    except ValueError:
        p.error("argument -m/--sizes: expected MIN:MAX in bytes, got %r" % a.sizes)
    if lo < 4 or hi < lo:
        p.error("argument -m/--sizes: need 4 <= MIN <= MAX, got %r" % a.sizes)
    if a.repeats < 1:
        p.error("argument -r/--repeats: must be >= 1")
    if a.iterations < 0:
        p.error("argument -i/--iterations: must be >= 0")
    if a.ddp_steps < 0:
        p.error("argument --ddp-steps: must be >= 0")
    if a.batch < 1:
        p.error("argument --batch: must be >= 1")
    if a.threads < 1:
        p.error("argument --threads: must be >= 1")
    try:
        a.layer_max = parse_size(a.layer_max)
    except ValueError:
        p.error("argument --layer-max: expected a size in bytes, got %r" % a.layer_max)
    a.lo, a.hi = lo, hi
    return a


def iterations_for(nbytes, fixed):
    if fixed:
        return fixed
    if nbytes <= 65536:
        return 1000 if nbytes <= 4096 else 300
    return max(5, int(200 * (1 << 20) / max(nbytes, 1 << 20) ** 1.0 / 4))


def main(argv):
    global SmallCNN, WideMLP
    a = parse_args(argv)  # before importing torch: usage errors are quick
    SmallCNN, WideMLP = _small_cnn()
    import numpy as np
    import torch
    import torch.distributed as dist
    import weft
    import weft.torch as wt
    from weft import _lib

    torch.set_num_threads(a.threads)
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    comm = wt.world_comm()

    def over_ranks(v, op):
        v = np.array(v, dtype=np.float64)
        comm.allreduce(v, op=op)
        return v

    def time_calls(fn, iters, out):
        """Warm up, then time iters calls one by one (seconds, into out)."""
        for _ in range(min(10, iters)):
            fn()
        comm.barrier()
        clock = time.perf_counter
        for _ in range(iters):
            t0 = clock()
            fn()
            out.append(clock() - t0)

    def process_cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def stats(samples, scale):
        # each rank's median and mean, then the slowest rank's
        if not samples:
            return float("nan"), float("nan")
        v = over_ranks([np.median(samples) * scale, np.mean(samples) * scale], weft.MAX)
        return float(v[0]), float(v[1])

    rows = []
    if rank == 0:
        print("# weft.torch allreduce vs gloo, %d ranks, torch %s, completion=%s, torch threads "
              "%d" % (size, torch.__version__, weft.COMPLETION_MODE, a.threads))
        print("# median and mean of each call (%d rounds alternating the backends)" % a.repeats)
        print("# %-10s %10s %10s %8s %10s %10s %8s %10s %10s %10s %10s" % (
            "Size", "weft(us)", "gloo(us)", "speedup", "weft_mean", "gloo_mean", "speedup",
            "wait(us)", "future(us)", "Comm(us)", "ctypes(us)"))
        sys.stdout.flush()
    n = a.lo
    while n <= a.hi:
        count = max(1, n // 4)
        iters = iterations_for(n, a.iterations)
        t = torch.ones(count, dtype=torch.float32)
        x = np.ones(count, dtype=np.float32)
        f = _lib.weft_allreduce
        ptr, h = x.ctypes.data, comm.handle
        layers = n <= a.layer_max
        s = {k: [] for k in ("weft", "gloo", "wait", "future", "comm", "ctypes")}
        for _ in range(a.repeats):
            time_calls(lambda: dist.all_reduce(t), iters, s["weft"])
            time_calls(lambda: dist.all_reduce(t, group=gloo), iters, s["gloo"])
            if layers:
                time_calls(lambda: dist.all_reduce(t, async_op=True).wait(), iters, s["wait"])
                time_calls(lambda: dist.all_reduce(t, async_op=True).get_future().wait(),
                           max(10, iters // 10), s["future"])
                time_calls(lambda: comm.allreduce(x), iters, s["comm"])
                time_calls(lambda: f(_lib.IN_PLACE_PTR, ptr, count, weft.FLOAT32, weft.SUM, h),
                           iters, s["ctypes"])
        st = {k: stats(v, 1e6) for k, v in s.items()}
        (wm, wa), (gm, ga) = st["weft"], st["gloo"]
        rows.append((count * 4, wm, gm, gm / wm, wa, ga, ga / wa, st["wait"][0],
                     st["future"][0], st["comm"][0], st["ctypes"][0]))
        if rank == 0:
            print("%-12d %10.2f %10.2f %8.2f %10.2f %10.2f %8.2f %10.2f %10.2f %10.2f %10.2f"
                  % rows[-1])
            sys.stdout.flush()
        n *= 2

    ddp_rows = []
    if a.ddp_steps:
        if rank == 0:
            print("# DDP step: batch %d per rank, %d rounds of %d steps alternating weft and "
                  "gloo; the slowest rank's step" % (a.batch, a.repeats, a.ddp_steps))
            print("# %-28s %10s %10s %8s %10s %10s %8s %10s %10s" % (
                "model", "weft(ms)", "gloo(ms)", "speedup", "weft_mean", "gloo_mean",
                "speedup", "weft_cpu", "gloo_cpu"))
        for model_name, factory in (("SmallCNN", SmallCNN), ("WideMLP", WideMLP)):
            steps = []
            for name, group in (("weft", None), ("gloo", gloo)):
                step = make_ddp_step(torch, factory, group, rank, a.batch)
                for _ in range(3):
                    step()
                steps.append((name, step))
            times = {name: [] for name, _ in steps}
            cpus = {name: [] for name, _ in steps}
            for _ in range(a.repeats):
                for name, step in steps:
                    comm.barrier()
                    for _ in range(a.ddp_steps):
                        c0 = process_cpu()
                        t0 = time.perf_counter()
                        step()
                        times[name].append(time.perf_counter() - t0)
                        cpus[name].append(process_cpu() - c0)
            res = {}
            for name, v in times.items():
                # the slowest rank's time at each step
                per_step = over_ranks(v, weft.MAX) * 1e3
                # CPU time of the whole process (every thread) per step, the
                # busier rank's median: what the backend's threads take from
                # the training threads on a fully used machine
                cpu = stats(cpus[name], 1e3)[0]
                res[name] = (float(np.median(per_step)), float(np.mean(per_step)), cpu)
                ddp_rows.append((model_name, name) + res[name])
            if rank == 0:
                nparams = sum(p.numel() for p in factory().parameters())
                label = "%s (%.1f MiB grads)" % (model_name, nparams * 4 / 2**20)
                (wm, wa, wc), (gm, ga, gc) = res["weft"], res["gloo"]
                print("%-30s %10.2f %10.2f %8.2f %10.2f %10.2f %8.2f %10.2f %10.2f" % (
                    label, wm, gm, gm / wm, wa, ga, ga / wa, wc, gc))
                sys.stdout.flush()
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("bytes,weft_us,gloo_us,speedup,weft_mean_us,gloo_mean_us,speedup_mean,"
                    "wait_us,future_us,comm_us,ctypes_us\n")
            for r in rows:
                f.write("%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n" % r)
            # DDP rows: median step in the weft_us column, mean step in weft_mean_us,
            # the process's CPU time per step (median) in gloo_mean_us's place (ms)
            for model, name, med, mean, cpu in ddp_rows:
                f.write("ddp_step_%s_%s_ms,%.3f,,,%.3f,%.3f,,,,,\n" % (model, name, med, mean,
                                                                     cpu))
    dist.destroy_process_group()
    return 0


def make_ddp_step(torch, factory, group, rank, batch):
    """One DDP training step of a fresh model on `group` (None: default)."""
    torch.manual_seed(0)
    model = factory()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp(x), y).backward()
        opt.step()
    return step


def _small_cnn():
    """The example's CNN (python/examples/ddp_fashion_mnist.py, the same model
    it trains) and a communication-bound MLP."""
    import os
    import torch.nn as nn
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from ddp_fashion_mnist import make_model
    SmallCNN = type(make_model())

    class WideMLP(nn.Module):
        """784 -> 2048 -> 2048 -> 10: 5.8 M parameters, little compute per
        byte of gradient (a communication-bound step)."""

        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(784, 2048)
            self.l2 = nn.Linear(2048, 2048)
            self.l3 = nn.Linear(2048, 10)

        def forward(self, x):
            f = nn.functional
            return self.l3(f.relu(self.l2(f.relu(self.l1(x.flatten(1))))))
    return SmallCNN, WideMLP


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
