#!/usr/bin/env python3
"""Train a small CNN on Fashion-MNIST with DistributedDataParallel, on the
weft backend or on gloo, and report the test accuracy.

    mpiexec -n 2 python python/examples/ddp_fashion_mnist.py --backend weft
    mpiexec -n 2 python python/examples/ddp_fashion_mnist.py --backend gloo
    torchrun --standalone --nproc-per-node 2 python/examples/ddp_fashion_mnist.py

The training code is plain PyTorch: `import weft.torch` registers the
backend (and, under mpiexec, sets RANK, WORLD_SIZE and the store's address;
under torchrun, init_process_group makes Weft's world through torch's store),
the rest does not know which backend it runs on. With the same seed both
backends give the same model (the same sums), hence the same accuracy.

Data: the IDX files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist), as Loom reads them.
"""

import argparse
import gzip
import os
import struct
import sys
import time

VERSION = "0.1.0"
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ddp_fashion_mnist.py",
                                description="DDP training of a small CNN on Fashion-MNIST over "
                                            "the weft or gloo torch.distributed backend. Run "
                                            "under mpiexec -n N or torchrun --nproc-per-node N.")
    p.add_argument("--version", action="version", version="%(prog)s " + VERSION)
    p.add_argument("--backend", choices=("weft", "gloo"), default="weft",
                   help="torch.distributed backend (default weft)")
    p.add_argument("--data-dir", default=DEFAULT_DATA,
                   help="directory of the *-idx?-ubyte.gz files (default %s)" % DEFAULT_DATA)
    p.add_argument("--epochs", type=int, default=1, help="epochs (default 1)")
    p.add_argument("--batch", type=int, default=32, help="batch per rank (default 32)")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    p.add_argument("--limit-train", type=int, default=0,
                   help="use only the first N training images (default all 60000)")
    p.add_argument("--limit-test", type=int, default=0,
                   help="evaluate on the first N test images (default all 10000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the initial model and shuffle")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    a = p.parse_args(argv)
    for name in ("epochs", "batch", "threads"):
        if getattr(a, name) < 1:
            p.error("argument --%s: must be >= 1" % name)
    for name in ("limit_train", "limit_test"):
        if getattr(a, name) < 0:
            p.error("argument --%s: must be >= 0" % name.replace("_", "-"))
    if not a.lr > 0 or a.lr == float("inf"):
        p.error("argument --lr: must be a positive finite number")
    return a


def read_idx(path, magic, limit):
    """IDX file (gzip): images (magic 2051) as uint8 [n, 28, 28], labels (2049) [n]."""
    with gzip.open(path, "rb") as f:
        head = f.read(8)
        m, n = struct.unpack(">II", head)
        if m != magic:
            raise ValueError("%s: magic %d, expected %d" % (path, m, magic))
        shape = (n,)
        if magic == 2051:
            rows, cols = struct.unpack(">II", f.read(8))
            shape = (n, rows, cols)
        if limit:
            n = min(n, limit)
            shape = (n,) + shape[1:]
        count = 1
        for s in shape:
            count *= s
        data = f.read(count)
        if len(data) != count:
            raise ValueError("%s: truncated (%d of %d bytes)" % (path, len(data), count))
    return data, shape


def load(data_dir, train, limit):
    import torch
    pre = "train" if train else "t10k"
    img, ishape = read_idx(os.path.join(data_dir, pre + "-images-idx3-ubyte.gz"), 2051, limit)
    lab, _ = read_idx(os.path.join(data_dir, pre + "-labels-idx1-ubyte.gz"), 2049, limit)
    x = torch.frombuffer(bytearray(img), dtype=torch.uint8).view(ishape).float()
    x = ((x / 255.0) - 0.2860) / 0.3530  # Fashion-MNIST mean and std
    y = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
    return x.unsqueeze(1), y


def make_model():
    import torch.nn as nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 32, 3)
            self.c2 = nn.Conv2d(32, 64, 3)
            self.f1 = nn.Linear(64 * 5 * 5, 128)
            self.f2 = nn.Linear(128, 10)

        def forward(self, x):
            f = nn.functional
            x = f.max_pool2d(f.relu(self.c1(x)), 2)
            x = f.max_pool2d(f.relu(self.c2(x)), 2)
            return self.f2(f.relu(self.f1(x.flatten(1))))
    return SmallCNN()


def main(argv):
    a = parse_args(argv)
    import torch
    import torch.distributed as dist
    import weft.torch  # noqa: F401  (registers "weft"; sets RANK etc. under mpiexec)

    torch.set_num_threads(a.threads)
    try:
        xtr, ytr = load(a.data_dir, True, a.limit_train)
        xte, yte = load(a.data_dir, False, a.limit_test)
    except (OSError, ValueError) as e:
        print("ddp_fashion_mnist: cannot read the data: %s (install the dataset-fashion-mnist "
              "package or pass --data-dir)" % e, file=sys.stderr)
        return 1
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)
    model = make_model()
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    t0 = time.perf_counter()
    for epoch in range(a.epochs):
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        perm = torch.randperm(n, generator=g)
        per_rank = n // world
        mine = perm[rank * per_rank:(rank + 1) * per_rank]
        steps = per_rank // a.batch
        total = torch.zeros(2, dtype=torch.float64)
        for s in range(steps):
            idx = mine[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad()
            loss = loss_fn(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(idx), len(idx)], dtype=torch.float64)
        dist.all_reduce(total)
        if rank == 0:
            print("epoch %d: loss %.4f (%d steps of %d x %d images, %.1f s)" %
                  (epoch + 1, total[0] / total[1], steps, world, a.batch,
                   time.perf_counter() - t0))
            sys.stdout.flush()
    # evaluation: each rank scores a slice of the test set, the counts are summed
    model.eval()
    m = xte.shape[0]
    lo, hi = rank * m // world, (rank + 1) * m // world
    with torch.no_grad():
        pred = model(xte[lo:hi]).argmax(1)
    counts = torch.tensor([int((pred == yte[lo:hi]).sum()), hi - lo], dtype=torch.int64)
    dist.all_reduce(counts)
    if rank == 0:
        print("backend %s, %d ranks: test accuracy %.4f (%d of %d), %.1f s" %
              (a.backend, world, counts[0].item() / counts[1].item(), counts[0].item(),
               counts[1].item(), time.perf_counter() - t0))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
