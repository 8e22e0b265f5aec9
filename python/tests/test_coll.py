"""Every collective and point-to-point call of weft.Comm, blocking and
nonblocking, for every datatype, against numpy references computed from
every rank's (deterministic) input. Run under mpiexec -n 1..4."""

import array

import numpy as np
import pytest

import weft
from conftest import DTYPES, to_storage, to_values, pass_dtype

N = 37  # elements per block: odd, not a multiple of anything


def rank_values(r, n=N, base=1):
    # small integers, exact in every datatype (int8 and float16 included),
    # products of up to 4 ranks stay below 127 (2*3*2*3)
    return (np.arange(n) % 2 + base + (r % 2)).astype(np.float64)


def ref_reduce(op, size, n=N):
    vals = np.stack([rank_values(r, n) for r in range(size)])
    if op == weft.SUM:
        return vals.sum(0)
    if op == weft.PROD:
        return vals.prod(0)
    if op == weft.MIN:
        return vals.min(0)
    if op == weft.MAX:
        return vals.max(0)
    if op == weft.AVG:
        return vals.sum(0) / size
    raise AssertionError(op)


def is_int(wd):
    return wd in (weft.INT8, weft.UINT8, weft.INT16, weft.UINT16, weft.INT32, weft.UINT32,
                  weft.INT64, weft.UINT64)


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
@pytest.mark.parametrize("op", [weft.SUM, weft.PROD, weft.MIN, weft.MAX, weft.AVG],
                         ids=["sum", "prod", "min", "max", "avg"])
def test_allreduce_dtypes_ops(comm, wd, npt, op):
    x = to_storage(rank_values(comm.rank), wd, npt)
    out = np.zeros_like(x)
    comm.allreduce(x, out, op=op, dtype=pass_dtype(wd))
    inplace = x.copy()
    comm.iallreduce(inplace, op=op, dtype=pass_dtype(wd)).wait()
    ref = ref_reduce(op, comm.size)
    if op == weft.AVG and is_int(wd):
        ref = np.floor(ref)  # integer AVG truncates (values are positive)
    if op == weft.AVG and not is_int(wd):
        ref = to_values(to_storage(ref, wd, npt), wd)  # the quotient rounded to the type
    np.testing.assert_allclose(to_values(out, wd), ref, rtol=0, atol=0)
    np.testing.assert_array_equal(inplace, out)
    np.testing.assert_array_equal(x, to_storage(rank_values(comm.rank), wd, npt))


@pytest.mark.parametrize("op,fn", [(weft.BAND, np.bitwise_and), (weft.BOR, np.bitwise_or),
                                   (weft.BXOR, np.bitwise_xor)], ids=["band", "bor", "bxor"])
@pytest.mark.parametrize("npt", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64])
def test_allreduce_bitwise(comm, op, fn, npt):
    vals = [((np.arange(N) * 7 + 3 * r + 1) % 100).astype(npt) for r in range(comm.size)]
    x = vals[comm.rank].copy()
    comm.allreduce(x, op=op)
    ref = vals[0]
    for v in vals[1:]:
        ref = fn(ref, v)
    np.testing.assert_array_equal(x, ref)


def test_allreduce_sizes(comm):
    # from one element to past the ring chunk (256 KiB), so each algorithm runs
    for n in (1, 2, 7, 1000, 70000, 200003):
        x = np.full(n, comm.rank + 1, dtype=np.float32)
        comm.allreduce(x)
        assert (x == comm.size * (comm.size + 1) / 2).all(), n


def test_array_kinds(comm):
    # buffer protocol (array.array, bytearray) and plain __array_interface__
    a = array.array("d", [comm.rank + 1.0] * 5)
    comm.allreduce(a)
    assert list(a) == [comm.size * (comm.size + 1) / 2] * 5
    b = bytearray([comm.rank + 1] * 3)
    comm.allreduce(b, op=weft.MAX)
    assert list(b) == [comm.size] * 3

    class Wrapped:
        def __init__(self, arr):
            self._a = arr
            self.__array_interface__ = arr.__array_interface__
    w = np.full(4, comm.rank, dtype=np.int64)
    comm.allreduce(Wrapped(w))
    assert (w == comm.size * (comm.size - 1) // 2).all()
    # a read-only input (bytes) to an output array
    out = np.zeros(4, dtype=np.uint8)
    comm.allreduce(bytes([1, 2, 3, 4]), out, dtype=weft.UINT8)
    assert list(out) == [comm.size * v for v in (1, 2, 3, 4)]


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_reduce_scatter(comm, wd, npt):
    p = comm.size
    full = [rank_values(r, N * p) for r in range(p)]
    x = to_storage(full[comm.rank], wd, npt)
    out = to_storage(np.zeros(N), wd, npt)
    comm.reduce_scatter(x, out, dtype=pass_dtype(wd))
    out2 = to_storage(np.zeros(N), wd, npt)
    comm.ireduce_scatter(x, out2, op=weft.MAX, dtype=pass_dtype(wd)).wait()
    blk = slice(comm.rank * N, (comm.rank + 1) * N)
    np.testing.assert_array_equal(to_values(out, wd), np.sum(full, 0)[blk])
    np.testing.assert_array_equal(to_values(out2, wd), np.max(full, 0)[blk])


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_allgather_alltoall(comm, wd, npt):
    p, r = comm.size, comm.rank
    mine = to_storage(rank_values(r) + r, wd, npt)
    out = to_storage(np.zeros(N * p), wd, npt)
    comm.allgather(mine, out, dtype=pass_dtype(wd))
    ref = np.concatenate([rank_values(q) + q for q in range(p)])
    inplace = to_storage(np.zeros(N * p), wd, npt)
    inplace[r * N:(r + 1) * N] = mine
    comm.iallgather(weft.IN_PLACE, inplace, dtype=pass_dtype(wd)).wait()
    # alltoall: block j of rank i holds 10*i + j (+ position)
    send = to_storage(np.concatenate([np.full(N, 10 * r + j) + np.arange(N) % 5
                                      for j in range(p)]), wd, npt)
    recv = to_storage(np.zeros(N * p), wd, npt)
    comm.alltoall(send, recv, dtype=pass_dtype(wd))
    recv2 = to_storage(np.zeros(N * p), wd, npt)
    comm.ialltoall(send, recv2, dtype=pass_dtype(wd)).wait()
    a2a_ref = np.concatenate([np.full(N, 10 * i + r) + np.arange(N) % 5 for i in range(p)])
    np.testing.assert_array_equal(to_values(out, wd), ref)
    np.testing.assert_array_equal(to_values(inplace, wd), ref)
    np.testing.assert_array_equal(to_values(recv, wd), a2a_ref)
    np.testing.assert_array_equal(recv2, recv)


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_rooted(comm, wd, npt):
    p, r = comm.size, comm.rank
    got = []
    for root in range(p):
        # bcast
        b = to_storage(rank_values(r) * (r + 1), wd, npt)
        comm.bcast(b, root=root, dtype=pass_dtype(wd))
        b2 = to_storage(rank_values(r) * (r + 1), wd, npt)
        comm.ibcast(b2, root=root, dtype=pass_dtype(wd)).wait()
        got.append(("bcast", to_values(b, wd), rank_values(root) * (root + 1)))
        got.append(("ibcast", to_values(b2, wd), rank_values(root) * (root + 1)))
        # reduce (plain and in place at the root)
        x = to_storage(rank_values(r), wd, npt)
        out = to_storage(np.zeros(N), wd, npt) if r == root else None
        comm.reduce(x, out, op=weft.SUM, root=root, dtype=pass_dtype(wd))
        y = to_storage(rank_values(r), wd, npt)
        if r == root:
            comm.ireduce(weft.IN_PLACE, y, op=weft.MAX, root=root, dtype=pass_dtype(wd)).wait()
            got.append(("reduce", to_values(out, wd), ref_reduce(weft.SUM, p)))
            got.append(("ireduce", to_values(y, wd), ref_reduce(weft.MAX, p)))
        else:
            comm.ireduce(y, None, op=weft.MAX, root=root, dtype=pass_dtype(wd)).wait()
        # gather / scatter
        g = to_storage(np.full(N, r + 2.0), wd, npt)
        gout = to_storage(np.zeros(N * p), wd, npt) if r == root else None
        comm.gather(g, gout, root=root, dtype=pass_dtype(wd))
        sfull = to_storage(np.repeat(np.arange(p) + 3.0, N), wd, npt) if r == root else None
        sout = to_storage(np.zeros(N), wd, npt)
        comm.iscatter(sfull, sout, root=root, dtype=pass_dtype(wd)).wait()
        if r == root:
            got.append(("gather", to_values(gout, wd), np.repeat(np.arange(p) + 2.0, N)))
        got.append(("scatter", to_values(sout, wd), np.full(N, r + 3.0)))
    for name, have, want in got:
        np.testing.assert_array_equal(have, want, err_msg=name)


def test_gather_scatter_in_place(comm):
    p, r = comm.size, comm.rank
    root = p - 1
    if r == root:
        buf = np.zeros(4 * p, dtype=np.int32)
        buf[root * 4:(root + 1) * 4] = 100 + r
        comm.igather(weft.IN_PLACE, buf, root=root).wait()
        src = np.arange(4 * p, dtype=np.int32)
        comm.scatter(src, weft.IN_PLACE, root=root)
        ok = (buf == np.repeat(100 + np.arange(p), 4)).all() and \
            (src == np.arange(4 * p)).all()
    else:
        comm.igather(np.full(4, 100 + r, dtype=np.int32), None, root=root).wait()
        mine = np.zeros(4, dtype=np.int32)
        comm.scatter(None, mine, root=root)
        ok = (mine == np.arange(4 * r, 4 * r + 4)).all()
    assert ok


def test_barrier(comm):
    comm.barrier()
    comm.ibarrier().wait()


def test_point_to_point(comm):
    p, r = comm.size, comm.rank
    right, left = (r + 1) % p, (r - 1) % p
    # a ring of isend/irecv, received out of order (tag 2 before tag 1)
    s1 = np.full(10, r, dtype=np.int64)
    s2 = np.full(3, -r, dtype=np.float32)
    r1 = np.zeros(10, dtype=np.int64)
    r2 = np.zeros(3, dtype=np.float32)
    reqs = [comm.irecv(r2, left, tag=2), comm.irecv(r1, left, tag=1),
            comm.isend(s1, right, tag=1), comm.isend(s2, right, tag=2)]
    weft.waitall(reqs)
    # sendrecv both ways
    a = np.full(5, r * 1.5)
    b = np.zeros(5)
    comm.sendrecv(a, right, b, left, sendtag=7, recvtag=7)
    # blocking send/recv between pairs (0<->1, 2<->3); a lone last rank sends to itself
    # through isend
    c = np.zeros(2, dtype=np.uint8)
    peer = r ^ 1
    if peer >= p:
        rq = comm.isend(np.array([9, 9], dtype=np.uint8), r, tag=3)
        comm.recv(c, r, tag=3)
        rq.wait()
        want_c = [9, 9]
    elif r % 2 == 0:
        comm.send(np.array([r, 1], dtype=np.uint8), peer, tag=3)
        comm.recv(c, peer, tag=3)
        want_c = [peer, 1]
    else:
        comm.recv(c, peer, tag=3)
        comm.send(np.array([r, 1], dtype=np.uint8), peer, tag=3)
        want_c = [peer, 1]
    assert (r1 == left).all() and (r2 == -left).all()
    assert (b == left * 1.5).all()
    assert list(c) == want_c


def test_split(comm):
    p, r = comm.size, comm.rank
    # colors: even and odd ranks; key reverses the order
    sub = comm.split(r % 2, key=-r)
    members = [q for q in range(p) if q % 2 == r % 2]
    x = np.array([r], dtype=np.int32)
    sub.allreduce(x)
    order = np.zeros(sub.size, dtype=np.int32)
    sub.allgather(np.array([r], dtype=np.int32), order)
    none = comm.split(weft.UNDEFINED if r != 0 else 0)
    sub_size, sub_rank = sub.size, sub.rank
    sub.free()
    if none is not None:
        none.free()
    assert sub_size == len(members)
    assert sub_rank == sorted(members, reverse=True).index(r)
    assert x[0] == sum(members)
    assert list(order) == sorted(members, reverse=True)
    assert (none is None) == (r != 0)


def test_create_group(comm):
    p, r = comm.size, comm.rank
    # the even ranks in reverse order, the odd ranks in order, each group made
    # by its members alone and at the same time as the other
    members = sorted((q for q in range(p) if q % 2 == 0), reverse=True) if r % 2 == 0 \
        else [q for q in range(p) if q % 2 == 1]
    g = comm.create_group(members)
    x = np.array([r + 1], dtype=np.int64)
    g.allreduce(x)
    order = np.zeros(g.size, dtype=np.int32)
    g.allgather(np.array([r], dtype=np.int32), order)
    g_size, g_rank = g.size, g.rank
    g.free()
    bad = []
    for lst in ([r, r], [r, p], [(r + 1) % p] if p > 1 else [-1], "x"):
        with pytest.raises(weft.WeftError) as ei:
            comm.create_group(lst)
        bad.append(ei.value.status)
    assert g_size == len(members)
    assert g_rank == members.index(r)
    assert x[0] == sum(q + 1 for q in members)
    assert list(order) == members
    assert bad == [weft.ERR_INVALID_ARG] * 4


def test_from_mpi4py(comm):
    MPI = pytest.importorskip("mpi4py.MPI", reason="mpi4py not installed")
    c = weft.Comm.from_mpi4py(MPI.COMM_WORLD)
    x = np.ones(3, dtype=np.float64)
    c.allreduce(x)
    split = MPI.COMM_WORLD.Split(comm.rank % 2, comm.rank)
    c2 = weft.Comm.from_mpi4py(split)
    y = np.ones(1, dtype=np.int32)
    c2.allreduce(y)
    c2_size = c2.size
    c.free()
    c2.free()
    split.Free()
    assert (x == comm.size).all()
    assert y[0] == split_size(comm.size, comm.rank) == c2_size


def split_size(p, r):
    return len([q for q in range(p) if q % 2 == r % 2])


def test_types_without_weft_datatype_are_moved(comm):
    """bcast, allgather, alltoall, gather, scatter and sendrecv of arrays whose
    type Weft has no datatype for (complex, bool, big-endian, records, 0-d)
    move their bytes; a reduction of them is refused."""
    r, p = comm.rank, comm.size
    x = (np.arange(3) + 1j * (r + 1)).astype(np.complex128)
    comm.bcast(x, root=p - 1)
    np.testing.assert_array_equal(x, np.arange(3) + 1j * p)
    out = np.zeros((p, 2), bool)
    comm.allgather(np.array([r == 0, True]), out)
    np.testing.assert_array_equal(out, [[q == 0, True] for q in range(p)])
    ag = np.zeros((p, 4), ">f4")
    comm.allgather((np.arange(4) * (r + 1)).astype(">f4"), ag)
    np.testing.assert_array_equal(ag, [np.arange(4) * (q + 1) for q in range(p)])
    rec = np.zeros(2, dtype=[("a", "i4"), ("b", "f8")])
    rec["a"], rec["b"] = r, r / 2
    allr = np.zeros((p, 2), dtype=rec.dtype)
    comm.allgather(rec, allr)
    np.testing.assert_array_equal(allr["b"][:, 1], np.arange(p) / 2)
    a2a = (np.arange(2 * p) + 10j * r).astype(np.complex64)
    o2 = np.zeros_like(a2a)
    comm.ialltoall(a2a, o2).wait()
    np.testing.assert_array_equal(
        o2, np.array([[2 * r + k + 10j * q for k in range(2)] for q in range(p)]).ravel())
    g = np.zeros(p, np.complex64) if r == 0 else None
    comm.gather(np.array([1j * r], np.complex64), g, root=0)
    if r == 0:
        np.testing.assert_array_equal(g, 1j * np.arange(p))
    sc = np.zeros(1, np.complex64)
    comm.scatter(np.arange(p).astype(np.complex64) * 1j if r == 0 else None, sc, root=0)
    np.testing.assert_array_equal(sc, [1j * r])
    z = np.array(1.5 + 2j * r)
    comm.bcast(z, root=0)
    assert z == 1.5
    s, got = np.full(3, 1j * r, np.complex64), np.zeros(3, np.complex64)
    comm.sendrecv(s, (r + 1) % p, got, (r - 1) % p)
    np.testing.assert_array_equal(got, np.full(3, 1j * ((r - 1) % p)))
    with pytest.raises(weft.WeftError) as ei:
        comm.allreduce(np.ones(2, np.complex64))
    assert ei.value.status == weft.ERR_DATATYPE
    with pytest.raises(weft.WeftError):  # no byte view of strided memory: refused
        comm.bcast(np.zeros((4, 4), np.complex64)[:, ::2])
