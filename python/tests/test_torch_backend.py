"""The torch.distributed backend "weft": every operation DDP and common
training code call, through torch.distributed's own functions, against
references computed from every rank's deterministic input. Run under
mpiexec -n 1..4 (weft.torch sets RANK, WORLD_SIZE and the store's address
from Weft's world)."""

import os
import time

import pytest
import torch
import torch.distributed as dist

import weft
import weft.torch as wt

DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]


@pytest.fixture(scope="module", autouse=True)
def pg():
    dist.init_process_group("weft")
    yield
    dist.destroy_process_group()


def rk():
    return dist.get_rank(), dist.get_world_size()


def vals(r, n=11):
    return torch.arange(n, dtype=torch.float64) % 3 + 1 + (r % 2)


def test_backend_is_weft():
    assert dist.get_backend() == "weft"
    r, p = rk()
    assert (r, p) == (wt.world_comm().rank, wt.world_comm().size)


def test_backend_base():
    # torch without a Python-subclassable c10d Backend (2.11 and older) gets a
    # ProcessGroup subclass; WEFT_PY_TORCH_BASE=ProcessGroup forces that here
    forced = os.environ.get("WEFT_PY_TORCH_BASE") == "ProcessGroup"
    base = wt.WeftBackend.__mro__[1]
    if forced:
        assert base is dist.ProcessGroup
    else:
        assert base in (dist.ProcessGroup, torch._C._distributed_c10d.Backend)
    pg = dist.distributed_c10d._get_default_group()
    assert dist.get_backend(pg) == "weft"


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d) for d in DTYPES])
def test_allreduce_sum_dtypes(dtype):
    r, p = rk()
    t = vals(r).to(dtype)
    dist.all_reduce(t)
    want = sum(vals(q) for q in range(p)).to(dtype)
    assert torch.equal(t, want)


# (torch itself refuses AVG on integer tensors, whatever the backend)
@pytest.mark.parametrize("op,dtype", [(op, dt) for dt in (torch.float32, torch.int64)
                                      for op in ("SUM", "AVG", "MIN", "MAX", "PRODUCT")
                                      if op != "AVG" or dt.is_floating_point])
def test_allreduce_ops(op, dtype):
    r, p = rk()
    t = vals(r).to(dtype)
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
    allv = torch.stack([vals(q) for q in range(p)])
    want = {"SUM": allv.sum(0), "AVG": allv.sum(0) / p, "MIN": allv.min(0).values,
            "MAX": allv.max(0).values, "PRODUCT": allv.prod(0)}[op].to(dtype)
    torch.testing.assert_close(t, want, rtol=1e-6, atol=0)


def test_async_future_chain():
    # the future is completed by Weft's callback, without anyone waiting on the Work
    r, p = rk()
    ts = [torch.full((1000 * (k + 1),), float(r + k)) for k in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    futs = [w.get_future().then(lambda f: f.value()[0].sum().item()) for w in works]
    got = [f.wait() for f in futs]
    want = [sum(q + k for q in range(p)) * 1000.0 * (k + 1) for k in range(4)]
    assert got == want


def _opts(cls, async_op, **kw):
    o = cls()
    o.asyncOp = async_op
    for k, v in kw.items():
        setattr(o, k, v)
    return o


@pytest.mark.parametrize("async_op", [False, True], ids=["sync", "async"])
def test_sync_and_async_calls(async_op):
    # dist.all_reduce(async_op=False) and its kin set opts.asyncOp False:
    # the backend serves those with Weft's blocking call and returns a Work
    # with nothing left in flight; asyncOp True (DDP's, the C++ default)
    # returns requests in flight whose future the completion callback ends.
    from torch._C import _distributed_c10d as c10d
    r, p = rk()
    be = wt.WeftBackend(r, p, wt.world_comm())
    t = vals(r)
    flat_in = torch.arange(2 * p, dtype=torch.float32) + r
    gathered = torch.empty(p * 3)
    rs_out = torch.empty(2)
    b = vals(r) * (r + 1)
    co = [vals(r)[:4].clone(), vals(r)[4:].clone()]
    works = [
        be.allreduce([t], _opts(c10d.AllreduceOptions, async_op,
                                reduceOp=dist.ReduceOp.SUM)),
        be.broadcast([b], _opts(c10d.BroadcastOptions, async_op, rootRank=p - 1)),
        be.all_gather_single(gathered, torch.full((3,), float(r)),
                             _opts(c10d.AllgatherOptions, async_op)),
        be.reduce_scatter_single(rs_out, flat_in,
                                 _opts(c10d.ReduceScatterOptions, async_op,
                                       reduceOp=dist.ReduceOp.SUM)),
        be.allreduce_coalesced(co, _opts(c10d.AllreduceCoalescedOptions, async_op,
                                         reduceOp=dist.ReduceOp.MAX)),
        be.barrier(_opts(c10d.BarrierOptions, async_op)),
    ]
    for w in works:
        assert (len(w._reqs) == 0) == (not async_op)
    if async_op:
        for w in works:
            w.get_future().wait()
    assert all(w.is_completed() for w in works)
    assert torch.equal(t, sum(vals(q) for q in range(p)))
    assert torch.equal(b, vals(p - 1) * p)
    assert torch.equal(gathered, torch.arange(p, dtype=torch.float32).repeat_interleave(3))
    assert torch.equal(rs_out, sum(torch.arange(2 * p, dtype=torch.float32)[2 * r:2 * r + 2] + q
                                   for q in range(p)))
    maxv = torch.stack([vals(q) for q in range(p)]).max(0).values
    assert torch.equal(torch.cat(co), maxv)


def test_broadcast_reduce():
    r, p = rk()
    out = []
    for root in range(p):
        t = vals(r) * (r + 1)
        dist.broadcast(t, src=root)
        out.append(("bcast", t, vals(root) * (root + 1)))
        u = vals(r)
        dist.reduce(u, dst=root, op=dist.ReduceOp.MAX)
        if r == root:
            out.append(("reduce", u, torch.stack([vals(q) for q in range(p)]).max(0).values))
    for name, have, want in out:
        assert torch.equal(have, want), name


def test_allgather_forms():
    r, p = rk()
    mine = torch.full((2, 3), float(r))
    lst = [torch.empty(2, 3) for _ in range(p)]
    dist.all_gather(lst, mine)
    flat = torch.empty(2 * p, 3)
    dist.all_gather_into_tensor(flat, mine)
    w = dist.all_gather_into_tensor(torch.empty(2 * p, 3), mine, async_op=True)
    w.wait()
    for q in range(p):
        assert torch.equal(lst[q], torch.full((2, 3), float(q)))
        assert torch.equal(flat[2 * q:2 * q + 2], torch.full((2, 3), float(q)))


def test_allgather_uneven():
    # tensors whose sizes differ by rank; a wrong size for this rank's own
    # slot is refused, not truncated
    r, p = rk()
    outs = [torch.zeros(q + 1, 2) for q in range(p)]
    dist.all_gather(outs, torch.full((r + 1, 2), float(r)))
    t_outs = [torch.zeros(2, q + 1).t() for q in range(p)]  # not contiguous
    dist.all_gather(t_outs, torch.full((r + 1, 2), float(r) + 0.5))
    with pytest.raises(Exception) as ei:
        dist.all_gather([torch.zeros(5) for _ in range(p)], torch.ones(3))
    assert "WEFT_ERR_INVALID_ARG" in str(ei.value)
    for q in range(p):
        assert torch.equal(outs[q], torch.full((q + 1, 2), float(q)))
        assert torch.equal(t_outs[q], torch.full((q + 1, 2), float(q) + 0.5))


def test_uneven_gather_scatter_reduce_scatter():
    # each rank's tensor has its own size (q + 1 rows for rank q); the root
    # is the last rank, so that it differs from rank 0
    r, p = rk()
    root = p - 1
    outs = [torch.zeros(q + 1, 2) for q in range(p)] if r == root else None
    dist.gather(torch.full((r + 1, 2), float(r)), outs, dst=root)
    got = torch.zeros(r + 1, 2)
    dist.scatter(got, [torch.full((q + 1, 2), q + 0.5) for q in range(p)] if r == root else None,
                 src=root)
    rs = torch.zeros(r + 1)
    dist.reduce_scatter(rs, [torch.arange(q + 1.0) * (r + 1) for q in range(p)])
    a2a = [torch.zeros(r + 1) for q in range(p)]
    dist.all_to_all(a2a, [torch.full((q + 1,), float(r)) for q in range(p)])
    if r == root:
        for q in range(p):
            assert torch.equal(outs[q], torch.full((q + 1, 2), float(q)))
    assert torch.equal(got, torch.full((r + 1, 2), r + 0.5))
    assert torch.equal(rs, torch.arange(r + 1.0) * (p * (p + 1) // 2))
    for q in range(p):
        assert torch.equal(a2a[q], torch.full((r + 1,), float(q)))


def test_reduce_scatter_uneven(monkeypatch):
    # The list reduce_scatter of CPU tensors whose sizes differ by rank goes
    # through one reduce_scatterv (where libweft has it) of the concatenated
    # inputs; AVG (which reduce_scatterv does not serve), inputs of another
    # dtype than the output and a libweft without it take one reduce per
    # rank. 2-D tensors, a zero-size slot, a non-contiguous output, int and
    # bool tensors, an async Work's future, and the route CUDA tensors take
    # (host copies), run on CPU tensors.
    r, p = rk()
    calls = {"ireduce_scatterv": 0, "ireduce": 0}
    for name in calls:
        def counted(self, *a, _name=name, _f=getattr(weft.Comm, name), **k):
            calls[_name] += 1
            return _f(self, *a, **k)
        monkeypatch.setattr(weft.Comm, name, counted)

    def rows(q):  # rank q's block: (q + 1) % 3 rows of 2 (a zero on rank 2)
        return (q + 1) % 3

    def inp(j, src, dtype=torch.float32):  # rank src's input for rank j's block
        return (torch.arange(rows(j) * 2.0).reshape(rows(j), 2) + j + 3 * src).to(dtype)

    ins = [inp(j, r) for j in range(p)]
    allv = torch.stack([torch.cat([inp(j, q).reshape(-1) for j in range(p)])
                        for q in range(p)])
    off = sum(rows(j) * 2 for j in range(p)[:r])

    def want(red):
        return red[off:off + rows(r) * 2].reshape(rows(r), 2)
    s = torch.full((rows(r), 2), -1.0)
    dist.reduce_scatter(s, ins)
    m = torch.full((rows(r), 2), -1.0)
    w = dist.reduce_scatter(m, ins, op=dist.ReduceOp.MAX, async_op=True)
    fut = w.get_future().wait()
    avg = torch.full((rows(r), 2), -1.0)
    dist.reduce_scatter(avg, ins, op=dist.ReduceOp.AVG)
    nc = torch.full((2, rows(r)), -1.0).t()  # not contiguous
    dist.reduce_scatter(nc, ins, op=dist.ReduceOp.MIN)
    it = torch.zeros(rows(r), 2, dtype=torch.int32)
    dist.reduce_scatter(it, [inp(j, r, torch.int32) for j in range(p)],
                        op=dist.ReduceOp.PRODUCT)
    bl = torch.zeros(rows(r), 2, dtype=torch.bool)  # SUM of bool: any
    dist.reduce_scatter(bl, [inp(j, r) % 2 == r % 2 for j in range(p)])
    b = wt.WeftBackend(r, p, wt.world_comm())
    via = torch.full((rows(r), 2), -1.0)
    b._via_host(b.reduce_scatter, [via], [ins], None).wait()
    n_new = dict(calls)
    monkeypatch.setattr(wt, "_HAS_RSV", False)
    old = torch.full((rows(r), 2), -1.0)
    dist.reduce_scatter(old, ins, op=dist.ReduceOp.MAX)
    monkeypatch.undo()
    assert torch.equal(s, want(allv.sum(0)))
    assert torch.equal(m, want(allv.max(0).values))
    assert fut[0] is m or torch.equal(fut[0], m)
    assert torch.allclose(avg, want(allv.sum(0) / p))
    assert torch.equal(nc, want(allv.min(0).values))
    ints = torch.stack([torch.cat([inp(j, q, torch.int32).reshape(-1) for j in range(p)])
                        for q in range(p)])
    assert torch.equal(it, want(ints.prod(0)))
    bools = torch.stack([torch.cat([(inp(j, q) % 2 == q % 2).reshape(-1) for j in range(p)])
                         for q in range(p)])
    assert bl.dtype == torch.bool and torch.equal(bl, want(bools.any(0)))
    assert torch.equal(via, s)
    assert torch.equal(old, m)
    if p > 1 and wt._HAS_RSV:  # on one rank the sizes are all alike: the even path
        # s, m, nc, it, bl, via: one reduce_scatterv each; avg: one reduce per rank
        assert n_new == {"ireduce_scatterv": 6, "ireduce": p}, n_new
        assert calls == {"ireduce_scatterv": 6, "ireduce": 2 * p}, calls


def test_reduce_scatter_forms():
    r, p = rk()
    ins = [torch.full((3,), float(r * 10 + j)) for j in range(p)]
    out = torch.empty(3)
    dist.reduce_scatter(out, ins)
    want = sum(q * 10 + r for q in range(p))
    big = torch.cat(ins)
    out2 = torch.empty(3)
    dist.reduce_scatter_tensor(out2, big, op=dist.ReduceOp.MAX)
    assert torch.equal(out, torch.full((3,), float(want)))
    assert torch.equal(out2, torch.full((3,), float((p - 1) * 10 + r)))


def test_alltoall_forms():
    r, p = rk()
    # even list form
    ins = [torch.full((2,), float(10 * r + j)) for j in range(p)]
    outs = [torch.empty(2) for _ in range(p)]
    dist.all_to_all(outs, ins)
    # uneven list form: rank r sends j+1 elements to rank j
    uins = [torch.full((j + 1,), float(10 * r + j)) for j in range(p)]
    uouts = [torch.empty(r + 1) for _ in range(p)]
    dist.all_to_all(uouts, uins)
    # single tensor, even and with splits
    single = torch.arange(p * 2, dtype=torch.float32) + 100 * r
    sout = torch.empty(p * 2)
    dist.all_to_all_single(sout, single)
    in_splits = [j + 1 for j in range(p)]
    out_splits = [r + 1] * p
    sin = torch.cat([torch.full((j + 1,), float(10 * r + j)) for j in range(p)])
    sout2 = torch.empty(sum(out_splits))
    dist.all_to_all_single(sout2, sin, out_splits, in_splits)
    for i in range(p):
        assert torch.equal(outs[i], torch.full((2,), float(10 * i + r)))
        assert torch.equal(uouts[i], torch.full((r + 1,), float(10 * i + r)))
        assert torch.equal(sout[2 * i:2 * i + 2],
                           torch.tensor([2 * r, 2 * r + 1], dtype=torch.float32) + 100 * i)
        assert torch.equal(sout2[i * (r + 1):(i + 1) * (r + 1)],
                           torch.full((r + 1,), float(10 * i + r)))


def test_uneven_v_paths(monkeypatch):
    # The uneven allgather, alltoall and all_to_all_single of CPU tensors go
    # through Weft's allgatherv/alltoallv (where libweft has them): 2-D
    # tensors, sizes of zero, a non-contiguous output, bool and float8
    # tensors (moved as bytes), async Works and their futures, and the
    # route CUDA tensors take (host copies), run on CPU tensors.
    r, p = rk()
    calls = {"iallgatherv": 0, "ialltoallv": 0}
    for name in calls:
        def counted(self, *a, _name=name, _f=getattr(weft.Comm, name), **k):
            calls[_name] += 1
            return _f(self, *a, **k)
        monkeypatch.setattr(weft.Comm, name, counted)
    # all_to_all_single: rank r sends (r + j) % 3 rows of 2 to rank j
    in_splits = [(r + j) % 3 for j in range(p)]
    out_splits = [(q + r) % 3 for q in range(p)]
    rows = [torch.full(((r + j) % 3, 2), 10.0 * r + j) for j in range(p)]
    sin = torch.cat(rows) if rows else torch.empty(0, 2)
    sout = torch.full((2, sum(out_splits)), -1.0).t()  # not contiguous
    w = dist.all_to_all_single(sout, sin, out_splits, in_splits, async_op=True)
    w.get_future().wait()
    b = wt.WeftBackend(r, p, wt.world_comm())
    via = torch.zeros(sum(out_splits), 2)
    b._via_host(b.all_to_all_single, via, sin, out_splits, in_splits, None).wait()
    # uneven list alltoall with empty tensors, and of bool and float8 tensors
    a2a = [torch.full((q % 2, 3), -1.0) for q in range(p)]
    dist.all_to_all(a2a, [torch.full((r % 2, 3), float(r * 10 + j)) for j in range(p)])
    ba2a = [torch.zeros(q + 1, dtype=torch.bool) for q in range(p)]
    dist.all_to_all(ba2a, [torch.tensor([j % 2 == 0] * (r + 1)) for j in range(p)])
    f8 = MOVED_DTYPES[0] if MOVED_DTYPES else torch.float16
    f8_outs = [torch.zeros(q + 2).to(f8) for q in range(p)]
    dist.all_to_all(f8_outs, [torch.full((r + 2,), float(j + 1)).to(f8) for j in range(p)])
    # uneven allgather: 2-D, a zero-size slot, float8
    ag = [torch.full((q % 3, 2), -1.0) for q in range(p)]
    w2 = dist.all_gather(ag, torch.full((r % 3, 2), float(r)), async_op=True)
    w2.wait()
    f8_ag = [torch.zeros(q + 1).to(f8) for q in range(p)]
    dist.all_gather(f8_ag, torch.full((r + 1,), float(r + 1)).to(f8))
    for q in range(p):
        blk = sout[sum(out_splits[:q]):sum(out_splits[:q + 1])]
        assert torch.equal(blk, torch.full((out_splits[q], 2), 10.0 * q + r))
        assert torch.equal(via[sum(out_splits[:q]):sum(out_splits[:q + 1])], blk)
        assert torch.equal(a2a[q], torch.full((q % 2, 3), float(q * 10 + r)))
        assert torch.equal(ba2a[q], torch.tensor([r % 2 == 0] * (q + 1)))
        assert f8_outs[q].dtype == f8
        assert torch.equal(f8_outs[q].float(), torch.full((q + 2,), float(r + 1)))
        assert torch.equal(ag[q], torch.full((q % 3, 2), float(q)))
        assert torch.equal(f8_ag[q].float(), torch.full((q + 1,), float(q + 1)))
    if wt._HAS_V:  # on one rank the list forms' shapes are all alike: the even paths
        assert calls == ({"iallgatherv": 2, "ialltoallv": 5} if p > 1 else
                         {"iallgatherv": 0, "ialltoallv": 2}), calls


def test_reduce_scatterv_empty_block_without_address():
    # torch's empty tensors have no address (data_ptr() 0): a rank whose
    # block is empty passes one as recvbuf, as MPI allows (libweft takes NULL)
    comm = wt.world_comm()
    p, r = comm.size, comm.rank
    counts = [0 if q % 2 else 2 for q in range(p)]  # 2, 0, 2, 0
    x = torch.arange(float(sum(counts))) + r
    out = torch.full((counts[r],), -1.0)
    comm.reduce_scatterv(x, out, counts)
    out2 = torch.full((counts[r],), -1.0)
    comm.ireduce_scatterv(x, out2, counts, op=weft.MIN).wait()
    off = sum(counts[:r])
    ref = torch.arange(float(sum(counts)))[off:off + counts[r]]
    assert torch.equal(out, ref * p + p * (p - 1) / 2)
    assert torch.equal(out2, ref)


def test_gather_scatter_barrier():
    r, p = rk()
    root = p - 1
    t = torch.full((3,), float(r))
    g = [torch.empty(3) for _ in range(p)] if r == root else None
    dist.gather(t, g, dst=root)
    s = [torch.full((2,), float(q * 5)) for q in range(p)] if r == root else None
    out = torch.empty(2)
    dist.scatter(out, s, src=root)
    dist.barrier()
    if r == root:
        assert all(torch.equal(g[q], torch.full((3,), float(q))) for q in range(p))
    assert torch.equal(out, torch.full((2,), float(r * 5)))


def test_send_recv():
    r, p = rk()
    if p == 1:
        pytest.skip("send/recv need two ranks (torch refuses sending to oneself)")
    right, left = (r + 1) % p, (r - 1) % p
    out = torch.empty(4, dtype=torch.int64)
    reqs = [dist.irecv(out, left, tag=5), dist.isend(torch.arange(4) + r, right, tag=5)]
    for q in reqs:
        q.wait()
    # blocking pairs 0<->1, 2<->3
    peer = r ^ 1
    got = torch.empty(2)
    if peer < p:
        if r % 2 == 0:
            dist.send(torch.full((2,), float(r)), peer)
            dist.recv(got, peer)
        else:
            dist.recv(got, peer)
            dist.send(torch.full((2,), float(r)), peer)
    assert torch.equal(out, torch.arange(4) + left)
    if peer < p:
        assert torch.equal(got, torch.full((2,), float(peer)))


@pytest.mark.filterwarnings("ignore::FutureWarning")  # newer torch renames these
@pytest.mark.parametrize("dv", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU here: CUDA tensors untested"))])
def test_functional_collectives(dv):
    # torch's functional collectives (DTensor, FSDP2, torch.compile): they
    # find the group by its name and call the coalesced forms; on the GPU
    # their tensors are CUDA tensors
    funcol = pytest.importorskip("torch.distributed._functional_collectives")
    r, p = rk()
    g = dist.group.WORLD
    name = g.group_name

    def on(t):
        return t.to(dv)

    def w(t):
        return funcol.wait_tensor(t).cpu()
    s = w(funcol.all_reduce(on(vals(r)), "sum", g))
    ag = w(funcol.all_gather_tensor(on(torch.tensor([float(r)])), 0, g))
    rs = w(funcol.reduce_scatter_tensor(on(torch.arange(2.0 * p)), "sum", 0, g))
    co = [w(t) for t in funcol.all_gather_into_tensor_coalesced(
        [on(torch.tensor([r])), on(torch.tensor([2.0 * r, 1.0]))], g)]
    rc = [w(t) for t in funcol.reduce_scatter_tensor_coalesced(
        [on(torch.ones(p)), on(torch.arange(3.0 * p))], "sum", [0, 0], g)]
    assert isinstance(name, str) and name
    assert torch.equal(s, sum(vals(q) for q in range(p)))
    assert torch.equal(ag, torch.arange(float(p)))
    assert torch.equal(rs, torch.tensor([2.0 * r * p, (2.0 * r + 1) * p]))
    assert torch.equal(co[0], torch.arange(p))
    assert torch.equal(co[1], torch.tensor([[2.0 * q, 1.0] for q in range(p)]).reshape(-1))
    assert torch.equal(rc[0], torch.full((1,), float(p)))
    assert torch.equal(rc[1], torch.arange(3.0 * r, 3.0 * r + 3) * p)


def test_wait_timeout():
    # Work.wait(timeout): a receive whose message is not sent yet raises
    # WEFT_ERR_TIMEOUT at the limit and stays in flight; sent afterwards, it
    # completes. A finished Work waits no longer.
    import datetime
    r, p = rk()
    if p == 1:
        pytest.skip("send/recv need two ranks (torch refuses sending to oneself)")
    got, raised, waited = torch.zeros(3), None, None
    if r == 0:
        w = dist.irecv(got, 1, tag=9)
        t0 = time.monotonic()
        with pytest.raises(weft.WeftError) as ei:
            w.wait(timeout=datetime.timedelta(milliseconds=300))
        waited = time.monotonic() - t0
        raised = ei.value.status
    dist.barrier()
    if r == 1:
        dist.send(torch.full((3,), 5.0), 0, tag=9)
    if r == 0:
        assert w.wait(timeout=datetime.timedelta(seconds=60))
        assert w.wait(timeout=datetime.timedelta(milliseconds=1))  # done: no limit to reach
    dist.barrier()
    if r == 0:
        assert raised == weft.ERR_TIMEOUT
        assert 0.3 <= waited < 5
        assert torch.equal(got, torch.full((3,), 5.0))


def test_work_outlives_python_references():
    # torch's C++ side may keep a Work that Python dropped (DDP under Join
    # waits for the forward pass's one in backward): it must still work.
    # Work.boxed holds it from C++ here.
    import gc
    Work = torch._C._distributed_c10d.Work
    r, p = rk()
    t = torch.full((3,), float(r + 1))
    w = dist.all_reduce(t, async_op=True)
    boxed = Work.boxed(w)
    del w
    gc.collect()
    for i in range(8):  # later collectives, each issued and waited
        dist.all_reduce(torch.ones(1), async_op=True).wait()
    w2 = Work.unbox(boxed)  # C++ calls: wait() and get_future() reach the Python object
    w2.wait()
    fut = w2.get_future().wait()
    assert torch.equal(t, torch.full((3,), p * (p + 1) / 2))
    assert fut[0] is t


def test_unwaited_works_let_go():
    # Works nobody waits for nor asks a future of are kept only until they
    # completed and _PIN_BOUND newer ones are pinned
    r, p = rk()
    ts = [torch.ones(2) for _ in range(3 * wt._PIN_BOUND)]
    for t in ts:
        dist.all_reduce(t, async_op=True)  # never waited
    dist.barrier()
    for _ in range(wt._PIN_BOUND):
        dist.all_reduce(torch.ones(1), async_op=True).wait()
    left = len(wt._pins)
    assert all(torch.equal(t, torch.full((2,), float(p))) for t in ts)
    assert left <= wt._PIN_BOUND + 1, left


def test_batch_isend_irecv():
    # torch asks the backend whether it coalesces (supports_coalescing) first
    r, p = rk()
    if p == 1:
        pytest.skip("send/recv need two ranks (torch refuses sending to oneself)")
    right, left = (r + 1) % p, (r - 1) % p
    got = [torch.zeros(3), torch.zeros(5, dtype=torch.int64)]
    ops = [dist.P2POp(dist.irecv, got[0], left), dist.P2POp(dist.irecv, got[1], right),
           dist.P2POp(dist.isend, torch.full((3,), float(r)), right),
           dist.P2POp(dist.isend, torch.arange(5) * r, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got[0], torch.full((3,), float(left)))
    assert torch.equal(got[1], torch.arange(5) * right)


def test_object_utilities():
    r, p = rk()
    objs = [None] * p
    dist.all_gather_object(objs, {"rank": r, "name": "r%d" % r})
    lst = [r * 100, "x"] if r == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert objs == [{"rank": q, "name": "r%d" % q} for q in range(p)]
    assert lst == [0, "x"]


def test_subgroups():
    # groups of some of the ranks: the even and the odd ranks (made by every
    # rank, torch's default), and the last rank alone, made by its member
    # only (use_local_synchronization); each group's collectives run at the
    # same time as the other's and are checked against float64 sums.
    r, p = rk()
    evens = list(range(0, p, 2))
    odds = list(range(1, p, 2))
    ge = dist.new_group(evens)
    go = dist.new_group(odds) if odds else None
    mine, members = (ge, evens) if r % 2 == 0 else (go, odds)
    t = vals(r)
    dist.all_reduce(t, group=mine)
    want = sum(vals(q) for q in members)
    got = [torch.zeros(1, dtype=torch.int64) for _ in members]
    dist.all_gather(got, torch.tensor([r]), group=mine)
    b = torch.tensor([float(r)])
    dist.broadcast(b, src=members[-1], group=mine)
    sizes = (dist.get_world_size(mine), dist.get_rank(mine))
    last = None
    if r == p - 1:
        alone = dist.new_group([r], use_local_synchronization=True)
        last = torch.full((3,), 7.0)
        dist.all_reduce(last, group=alone)
    dist.barrier()
    dist.all_reduce(torch.ones(1))  # the world group is still in step
    assert torch.equal(t, want)
    assert [int(x) for x in got] == members
    assert float(b) == float(members[-1])
    assert sizes == (len(members), members.index(r))
    if last is not None:
        assert torch.equal(last, torch.full((3,), 7.0))


MOVED_DTYPES = [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz")
                if hasattr(torch, n)]


@pytest.mark.parametrize("dv", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no GPU here: CUDA tensors untested"))])
def test_dtypes_weft_lacks_are_moved(dv):
    # the float8 types have no Weft datatype: broadcast,
    # allgather, alltoall, gather, scatter and send/recv move their bytes
    # (on a same-sized view); the result and the tensors' dtypes are checked
    # bit for bit. A reduction of them is refused (WEFT_ERR_DATATYPE).
    r, p = rk()
    root = p - 1

    def mk(dt, q, n=6):  # rank q's values: distinct bytes per rank and element
        bits = (torch.arange(n, dtype=torch.int32) * 7 + 11 * q + 1) % 100
        return bits.to(torch.uint8).view(dt) if dt.itemsize == 1 else bits.to(dt)

    def same(a, b, what):
        assert a.dtype == b.dtype and a.device.type == dv, what
        assert torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8)), what

    for dt in MOVED_DTYPES:
        b = mk(dt, r).to(dv)
        dist.broadcast(b, src=root)
        same(b, mk(dt, root), "broadcast %s" % dt)
        outs = [torch.empty(6, dtype=dt, device=dv) for _ in range(p)]
        dist.all_gather(outs, mk(dt, r).to(dv))
        for q in range(p):
            same(outs[q], mk(dt, q), "all_gather %s" % dt)
        flat = torch.empty(6 * p, dtype=dt, device=dv)
        dist.all_gather_into_tensor(flat, mk(dt, r).to(dv))
        same(flat, torch.cat([mk(dt, q) for q in range(p)]), "all_gather_into_tensor %s" % dt)
        a2a = torch.empty(2 * p, dtype=dt, device=dv)
        dist.all_to_all_single(a2a, mk(dt, r, 2 * p).to(dv))
        same(a2a, torch.cat([mk(dt, q, 2 * p)[2 * r:2 * r + 2] for q in range(p)]),
             "all_to_all_single %s" % dt)
        sc = torch.empty(2, dtype=dt, device=dv)
        dist.scatter(sc, [mk(dt, q, 2).to(dv) for q in range(p)] if r == root else None,
                     src=root)
        same(sc, mk(dt, r, 2), "scatter %s" % dt)
        if p > 1:
            got = torch.empty(6, dtype=dt, device=dv)
            reqs = [dist.irecv(got, (r - 1) % p, tag=5),
                    dist.isend(mk(dt, r).to(dv), (r + 1) % p, tag=5)]
            for q in reqs:
                q.wait()
            same(got, mk(dt, (r - 1) % p), "send/recv %s" % dt)
        with pytest.raises(weft.WeftError) as ei:
            dist.all_reduce(mk(dt, r).to(dv))
        assert "WEFT_ERR_DATATYPE" in str(ei.value), dt
    dist.all_reduce(torch.ones(1))  # the group is still in step


def test_bool_tensors():
    # bool tensors: moved as bytes, reduced so that every value stays 0 or 1
    # (SUM is any, PRODUCT all), as NCCL's backend does; DDP broadcasts a
    # model's bool buffers at its start
    r, p = rk()
    flags = torch.tensor([r == 0, True, False, r % 2 == 1])
    want_any = torch.tensor([True, True, False, p > 1])
    want_all = torch.tensor([p == 1, True, False, False])
    red = {}
    for name, op in (("sum", dist.ReduceOp.SUM), ("product", dist.ReduceOp.PRODUCT),
                     ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN),
                     ("bor", dist.ReduceOp.BOR), ("band", dist.ReduceOp.BAND)):
        t = flags.clone()
        dist.all_reduce(t, op=op)
        red[name] = t
    w = dist.all_reduce(flags.clone(), async_op=True)  # the future's value keeps bool
    fut = w.get_future().wait()
    b = torch.tensor([r == 0, r == 0])
    dist.broadcast(b, src=0)
    outs = [torch.zeros(2, dtype=torch.bool) for _ in range(p)]
    dist.all_gather(outs, torch.tensor([r % 2 == 0, True]))
    for name in ("sum", "max", "bor"):
        assert torch.equal(red[name], want_any), name
    for name in ("product", "min", "band"):
        assert torch.equal(red[name], want_all), name
    assert all(t.dtype == torch.bool for t in red.values())
    assert fut[0].dtype == torch.bool and torch.equal(fut[0], want_any)
    assert torch.equal(b, torch.tensor([True, True]))
    assert [o.tolist() for o in outs] == [[q % 2 == 0, True] for q in range(p)]


def test_destroy_group_frees_comm():
    # destroy_process_group(group) frees the group's Weft communicator
    # (MPI allows some thousands of communicators per process: a program
    # that makes and drops groups must not keep them all)
    r, p = rk()
    comms = []
    for i in range(6):
        g = dist.new_group(list(range(p)) if i % 2 else list(reversed(range(p))))
        t = torch.ones(1)
        dist.all_reduce(t, group=g)
        # the group is the backend itself where the backend is a ProcessGroup
        be = g if isinstance(g, wt.WeftBackend) else g._get_backend(torch.device("cpu"))
        comms.append(be.comm)
        assert float(t) == p
        dist.destroy_process_group(g)
    t = torch.ones(1)
    dist.all_reduce(t)  # the world group is untouched
    assert all(c.handle is None for c in comms)
    assert float(t) == p


def test_errors_raise():
    r, p = rk()
    comm = wt.world_comm()
    with pytest.raises(weft.WeftError) as ei:
        comm.allreduce(torch.ones(4, 4).t())  # not contiguous
    assert ei.value.status == weft.ERR_INVALID_ARG
    with pytest.raises(weft.WeftError) as ei:
        comm.allreduce(torch.ones(4, dtype=torch.complex64))
    assert ei.value.status == weft.ERR_DATATYPE
    if hasattr(torch, "float8_e5m2"):  # no Weft datatype: moved, never reduced
        with pytest.raises(Exception) as ei:
            dist.all_reduce(torch.ones(4).to(torch.float8_e5m2))
        assert "WEFT_ERR_DATATYPE" in str(ei.value)
    with pytest.raises(Exception) as ei:
        dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG)
    assert "WEFT_ERR_OP" in str(ei.value)
    with pytest.raises(Exception) as ei:
        dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR)
    assert "WEFT_ERR_DATATYPE" in str(ei.value)
    # the group still works
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(p)))


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no GPU here: the CUDA tensor paths are untested")


@needs_cuda
def test_cuda_stream_comm():
    r, p = rk()
    t = torch.full((1000,), float(r + 1), device="cuda")
    dist.all_reduce(t)
    torch.cuda.current_stream().synchronize()
    assert torch.equal(t.cpu(), torch.full((1000,), float(p * (p + 1) / 2)))
    # nonblocking, above the NCCL threshold (NCCL where every rank has its own
    # GPU, host transfer otherwise), and coalesced
    big = (torch.arange(1 << 16, dtype=torch.float32, device="cuda") % 7) * (r + 1)
    w = dist.all_reduce(big, async_op=True)
    w.wait()
    want = (torch.arange(1 << 16, dtype=torch.float32) % 7) * (p * (p + 1) / 2)
    assert torch.equal(big.cpu(), want)
    a, b = torch.full((3,), float(r), device="cuda"), torch.full((5,), 1.0, device="cuda")
    dist.all_reduce_coalesced([a, b])
    assert torch.equal(a.cpu(), torch.full((3,), float(p * (p - 1) / 2)))
    assert torch.equal(b.cpu(), torch.full((5,), float(p)))


def test_via_host_wrapper():
    # The path of CUDA tensors through host copies, run on CPU tensors (whose
    # host copies are themselves): every rank posts its receive before its
    # send, so a wrapper that blocked would hang here (WEFT_TIMEOUT).
    r, p = rk()
    b = wt.WeftBackend(r, p, wt.world_comm())
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    t = vals(r)
    b._via_host(b.broadcast, [t], opts).wait()
    assert torch.equal(t, vals(0))
    if p > 1:
        got = torch.empty(4)
        w1 = b._via_host(b.recv, [got], (r - 1) % p, 9)
        w2 = b._via_host(b.send, [torch.arange(4.0) + r], (r + 1) % p, 9, outputs=False)
        assert torch.equal(w1.get_future().wait()[0], got)
        w2.wait()
        assert torch.equal(got, torch.arange(4.0) + (r - 1) % p)


def _both(fn):
    """fn(device) on cpu and on cuda: the CUDA tensors' results must equal the
    CPU tensors' (which the tests above check against references)."""
    host = fn("cpu")
    dev = fn("cuda")
    torch.cuda.current_stream().synchronize()
    assert len(host) == len(dev)
    for (name, h), (_, d) in zip(host, dev):
        assert d.device.type == "cuda", name
        assert torch.equal(h, d.cpu()), name


@needs_cuda
def test_cuda_other_collectives():
    # through host copies (doc/python.md): every form, on every rank count
    r, p = rk()
    root = p - 1

    def run(dv):
        out = []
        t = vals(r).to(dv) * (r + 1)
        dist.broadcast(t, src=root)
        out.append(("broadcast", t))
        u = vals(r).to(dv)
        dist.reduce(u, dst=root, op=dist.ReduceOp.MAX)
        out.append(("reduce", u))
        for dt, op in ((torch.int16, dist.ReduceOp.SUM), (torch.int16, dist.ReduceOp.MIN)):
            s16 = (vals(r) * 1000 - 2500).to(dt).to(dv)  # int16: host transfer (no NCCL type)
            dist.all_reduce(s16, op=op)
            out.append(("all_reduce int16", s16))
        mine = torch.full((2, 3), float(r), device=dv)
        lst = [torch.empty(2, 3, device=dv) for _ in range(p)]
        dist.all_gather(lst, mine)
        out += [("all_gather", x) for x in lst]
        flat = torch.empty(2 * p, 3, device=dv)
        dist.all_gather_into_tensor(flat, mine, async_op=True).wait()
        out.append(("all_gather_into_tensor", flat))
        ins = [torch.full((3,), float(r * 10 + j), device=dv) for j in range(p)]
        rs = torch.empty(3, device=dv)
        dist.reduce_scatter(rs, ins)
        out.append(("reduce_scatter", rs))
        rs2 = torch.empty(3, device=dv)
        dist.reduce_scatter_tensor(rs2, torch.cat(ins), op=dist.ReduceOp.MAX)
        out.append(("reduce_scatter_tensor", rs2))
        a2a = [torch.empty(2, device=dv) for _ in range(p)]
        dist.all_to_all(a2a, [torch.full((2,), float(10 * r + j), device=dv) for j in range(p)])
        out += [("all_to_all", x) for x in a2a]
        sin = torch.cat([torch.full((j + 1,), float(10 * r + j)) for j in range(p)]).to(dv)
        sout = torch.empty((r + 1) * p, device=dv)
        dist.all_to_all_single(sout, sin, [r + 1] * p, [j + 1 for j in range(p)])
        out.append(("all_to_all_single", sout))
        g = [torch.empty(3, device=dv) for _ in range(p)] if r == root else None
        dist.gather(torch.full((3,), float(r), device=dv), g, dst=root)
        out += [("gather", x) for x in (g or [])]
        sc = torch.empty(2, device=dv)
        dist.scatter(sc, [torch.full((2,), float(q * 5), device=dv) for q in range(p)]
                     if r == root else None, src=root)
        out.append(("scatter", sc))
        if p > 1:
            got = torch.empty(4, device=dv)
            reqs = [dist.irecv(got, (r - 1) % p, tag=3),
                    dist.isend(torch.arange(4, dtype=torch.float32, device=dv) + r,
                               (r + 1) % p, tag=3)]
            for q in reqs:
                q.wait()
            out.append(("send/recv", got))
        return out

    _both(run)
