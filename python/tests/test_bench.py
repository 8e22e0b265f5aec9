"""The torch benchmark (python/benchmarks/bench_torch.py) end to end on a
few small sizes and one DDP step per round: it runs under mpiexec, and its
CSV holds every size and model with finite, positive times whose speedup
columns are the ratios of the time columns."""

import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import bench_torch  # noqa: E402


def test_bench_torch_small(tmp_path_factory):
    import torch.distributed as dist
    import weft.torch as wt
    # every rank writes its own path; rank 0's file is the one written
    out = str(tmp_path_factory.mktemp("bench") / "torch.csv")
    assert bench_torch.main(["-m", "4:1K", "-i", "20", "-r", "2", "--ddp-steps", "1",
                             "--layer-max", "16", "--csv", out]) == 0
    assert not dist.is_initialized()
    if wt.world_comm().rank != 0:
        return
    with open(out) as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("bytes,weft_us,gloo_us,speedup,weft_mean_us,gloo_mean_us,")
    rows = [ln.split(",") for ln in lines[1:] if ln]
    sizes = [r for r in rows if not r[0].startswith("ddp_step_")]
    assert [int(r[0]) for r in sizes] == [4 << k for k in range(9)]
    for r in sizes:
        weft, gloo, sp, wmean, gmean, spm = (float(x) for x in r[1:7])
        for v in (weft, gloo, wmean, gmean):
            assert math.isfinite(v) and v > 0, r
        assert math.isclose(sp, gloo / weft, rel_tol=1e-2), r
        assert math.isclose(spm, gmean / wmean, rel_tol=1e-2), r
        layers = [float(x) for x in r[7:11]]  # wait, future, Comm, ctypes
        if int(r[0]) <= 16:
            assert all(math.isfinite(v) and v > 0 for v in layers), r
        else:
            assert all(math.isnan(v) for v in layers), r
    # DDP rows: median step, mean step, CPU time per step (ms)
    ddp = {r[0]: (float(r[1]), float(r[4]), float(r[5])) for r in rows
           if r[0].startswith("ddp_step_")}
    assert sorted(ddp) == ["ddp_step_%s_%s_ms" % (m, b) for m in ("SmallCNN", "WideMLP")
                           for b in ("gloo", "weft")]
    assert all(math.isfinite(v) and v > 0 for t in ddp.values() for v in t)
