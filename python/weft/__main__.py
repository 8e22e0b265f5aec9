"""python -m weft: what this Weft is, seen from Python, and (--check) whether
it works in this job.

    python -m weft                                  # the report, one process
    mpiexec -n 2 python -m weft --check             # plus collectives on every rank
    torchrun --nproc-per-node 2 -m weft --check     # the same through torch.distributed

The report: the package and the library it loaded, Python, numpy, torch (and
whether torch.distributed is there for the "weft" backend), mpi4py, whether
this libweft can use a GPU here (and whether torch sees one it cannot), the
launcher this process sees and the kernel's transparent-huge-page mode.
--check initialises Weft (through torch.distributed under torchrun, or with
--torch) and runs allreduces of 40 B and 1 MiB, a broadcast, an allgather and
a barrier on the whole job, each checked against numpy on every rank; rank 0
prints the verdict. Exit status: 0 when every rank passed, 1 when a check
failed (the failing rank says which), 2 on a usage error. Thread: the main
thread.
"""

import argparse
import importlib
import os
import sys

import weft
from weft._bootstrap import mpi_launcher_key


def _thp_mode():
    """The bracketed word of the kernel's THP setting, or "unknown"."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            line = f.read()
    except OSError:
        return "unknown"
    a, b = line.find("["), line.find("]")
    return line[a + 1:b] if 0 <= a < b else "unknown"


def _launcher():
    """Which launcher started this process, as weft.torch tells them apart."""
    env = os.environ
    if "TORCHELASTIC_RUN_ID" in env:
        return "torchrun (RANK %s of WORLD_SIZE %s): the world is made through torch's store" % (
            env.get("RANK", "?"), env.get("WORLD_SIZE", "?"))
    k = mpi_launcher_key()
    if k is not None:
        return "an MPI launcher (%s=%s): the world is MPI's" % (k, env[k])
    if "RANK" in env and "WORLD_SIZE" in env:
        return "a launcher that sets RANK and WORLD_SIZE (%s of %s): weft.torch makes the world " \
               "through torch's store" % (env["RANK"], env["WORLD_SIZE"])
    return "none: a world of one process"


def _module_version(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    except Exception as e:  # a broken installation: say so, go on
        return "fails to import: %s" % e
    return getattr(module, "__version__", "?")


def _cuda(torch_usable):
    """What this libweft does with GPU buffers here, beside torch's view."""
    from weft import _lib
    gpus = None
    if torch_usable:
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    torch_says = "" if gpus is None else "torch sees %d GPU(s)" % gpus
    if _lib.weft_cuda_available():
        return ("usable%s: CUDA tensors and device buffers go on stream-bound communicators "
                "(NCCL where this libweft has it, host transfer otherwise)"
                % (" (%s)" % torch_says if torch_says else ""))
    if gpus:
        return ("not usable by this libweft, though torch sees %d GPU(s): CUDA tensors go "
                "through host copies (slower); build libweft with -Dcuda=enabled "
                "(doc/gpu.md)" % gpus)
    return ("none (this libweft has no CUDA device layer, or no GPU and driver here%s): "
            "host buffers" % ("; " + torch_says if torch_says else ""))


def report(out):
    """The lines of the report, on out."""
    def line(key, value):
        print("%-10s %s" % (key + ":", value), file=out)
    package = os.path.dirname(os.path.abspath(weft.__file__))
    line("weft", "%s (package %s)" % (weft.version(), package))
    line("library", weft.library_path())
    line("python", "%s (%s)" % (sys.version.split()[0], sys.executable))
    versions = {name: _module_version(name) for name in ("numpy", "torch", "mpi4py")}
    for name, v in versions.items():
        line(name, v if v is not None else "not installed")
    if versions["torch"] is not None and not versions["torch"].startswith("fails"):
        import torch.distributed as dist
        # weft.torch is not imported here: under an MPI launcher its import
        # makes the world, which every rank would have to do.
        line("backend", "torch.distributed backend \"weft\": %s" % (
            "registered by `import weft.torch`" if dist.is_available()
            else "none: this torch has no torch.distributed"))
    line("cuda", _cuda(versions["torch"] is not None and not versions["torch"].startswith("fails")))
    line("launcher", _launcher())
    line("pages", "transparent huge pages: %s (doc/design.md, \"Nodes\": large buffers on 2 MiB "
         "pages cost the node's shared-memory path less)" % _thp_mode())


def _fail(rank, what):
    print("weft check: rank %d: %s" % (rank, what), file=sys.stderr, flush=True)
    return 1


def check(use_torch):
    """Collectives on the whole job, checked on every rank. Returns this
    rank's exit status (0 passed, 1 failed)."""
    import numpy as np
    via = "weft"
    if use_torch:
        import torch
        import torch.distributed as dist
        importlib.import_module("weft.torch")  # registers the "weft" backend
        dist.init_process_group("weft")
        rank, size = dist.get_rank(), dist.get_world_size()
        t = torch.arange(5, dtype=torch.float64) + rank
        dist.all_reduce(t)
        want = size * torch.arange(5, dtype=torch.float64) + size * (size - 1) / 2
        if not torch.equal(t, want):
            return _fail(rank, "torch all_reduce gave %s, expected %s"
                         % (t.tolist(), want.tolist()))
        via = "torch.distributed and weft"
    else:
        weft.init()
    comm = weft.Comm.world()
    rank, size = comm.rank, comm.size
    x = np.arange(5.0) + rank
    comm.allreduce(x)
    want = size * np.arange(5.0) + size * (size - 1) / 2
    if not np.array_equal(x, want):
        return _fail(rank, "allreduce gave %s, expected %s" % (x.tolist(), want.tolist()))
    # 1 MiB: the large-message path (the node's shared memory, or the
    # transport's rendezvous), whose permissions a container may deny
    big = (np.arange(1 << 18, dtype=np.float32) % 1000) + rank
    comm.allreduce(big)
    want = size * (np.arange(1 << 18, dtype=np.float32) % 1000) + size * (size - 1) / 2
    if not np.array_equal(big, want):
        bad = int(np.flatnonzero(big != want)[0])
        return _fail(rank, "1 MiB allreduce: element %d is %r, expected %r"
                     % (bad, big[bad], want[bad]))
    b = np.full(3, float(rank))
    comm.bcast(b, root=size - 1)
    if not np.array_equal(b, np.full(3, float(size - 1))):
        return _fail(rank, "bcast from rank %d gave %s" % (size - 1, b.tolist()))
    g = np.empty(2 * size, dtype=np.int32)
    comm.allgather(np.array([rank, -rank], dtype=np.int32), g)
    if not np.array_equal(g, np.array([v for r in range(size) for v in (r, -r)], dtype=np.int32)):
        return _fail(rank, "allgather gave %s" % g.tolist())
    comm.barrier()
    if rank == 0:
        print("weft check: %d rank%s passed (allreduce of 40 B and 1 MiB, bcast, allgather, "
              "barrier through %s; "
              "transport %s; a 1 MiB float32 allreduce runs %s)" % (
                  size, "" if size == 1 else "s", via, comm.transport,
                  comm.algorithm("allreduce", 1 << 18)), flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m weft",
        description="What this Weft is, seen from Python; with --check, collectives on the "
                    "whole job (run it under the job's launcher: mpiexec -n N python -m weft "
                    "--check, or torchrun --nproc-per-node N -m weft --check).")
    parser.add_argument("--version", action="version", version="weft %s" % weft.version())
    parser.add_argument("--check", action="store_true",
                        help="initialise Weft and check allreduces of 40 B and 1 MiB, a bcast, an "
                             "allgather and a barrier on every rank (exit 1 if one fails)")
    parser.add_argument("--torch", action="store_true",
                        help="with --check: through torch.distributed's \"weft\" backend (the "
                             "default under torchrun)")
    parser.add_argument("--quiet", action="store_true",
                        help="with --check: no report, only the verdict")
    args = parser.parse_args(argv)
    if args.torch and not args.check:
        parser.error("--torch goes with --check")
    use_torch = args.torch or "TORCHELASTIC_RUN_ID" in os.environ
    rank = os.environ.get("RANK", os.environ.get("PMI_RANK", "0"))
    if not args.quiet and (not args.check or rank == "0"):
        try:
            report(sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:  # python -m weft | head: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            if not args.check:
                return 0
    if not args.check:
        return 0
    return check(use_torch)


if __name__ == "__main__":
    sys.exit(main())
