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


# ---- vector collectives (allgatherv, alltoallv) ---------------------------------
SENTINEL = 99.0  # what the elements between the blocks hold before and after


def agv_count(q):
    # rank q's block: 3, 0, 2, 4 elements for ranks 0..3 (a zero among them)
    return (2 * q + 3) % 5


def agv_block(q):
    return np.arange(agv_count(q)) + 10.0 * q + 1


def gapped_displs(counts, order):
    """Displacements placing the blocks in `order` (rank numbers) with a gap
    of 1, 2, 3, ... elements before each; and the buffer's length (2 more at
    the end)."""
    displs = [0] * len(counts)
    off = 0
    for i, q in enumerate(order):
        off += i + 1
        displs[q] = off
        off += counts[q]
    return displs, off + 2


def placed(blocks, displs, length):
    """The reference buffer: SENTINEL with blocks[q] at displs[q]."""
    ref = np.full(length, SENTINEL)
    for b, d in zip(blocks, displs):
        ref[d:d + len(b)] = b
    return ref


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_allgatherv(comm, wd, npt):
    p, r = comm.size, comm.rank
    dt = pass_dtype(wd)
    counts = [agv_count(q) for q in range(p)]
    blocks = [agv_block(q) for q in range(p)]
    mine = to_storage(blocks[r], wd, npt)
    # default displacements (the blocks one after another), blocking
    out = to_storage(np.full(sum(counts), SENTINEL), wd, npt)
    ret = comm.allgatherv(mine, out, counts, dtype=dt)
    # explicit displacements with gaps, blocks in reverse rank order,
    # counts and displs as numpy arrays; nonblocking
    displs, length = gapped_displs(counts, list(reversed(range(p))))
    gap = to_storage(np.full(length, SENTINEL), wd, npt)
    req = comm.iallgatherv(mine, gap, np.array(counts, np.int64), np.array(displs), dtype=dt)
    got = req.wait()
    # in place: this rank's block already at displs[rank]
    inpl = to_storage(placed([blocks[q] if q == r else [] for q in range(p)], displs, length),
                      wd, npt)
    comm.allgatherv(weft.IN_PLACE, inpl, counts, displs, dtype=dt)
    inpl2 = to_storage(placed([blocks[q] if q == r else [] for q in range(p)], displs, length),
                       wd, npt)
    comm.iallgatherv(weft.IN_PLACE, inpl2, counts, displs, dtype=dt).wait()
    assert ret is out and got is gap
    np.testing.assert_array_equal(to_values(out, wd), np.concatenate(blocks))
    ref = placed(blocks, displs, length)
    np.testing.assert_array_equal(to_values(gap, wd), ref)
    np.testing.assert_array_equal(to_values(inpl, wd), ref)
    np.testing.assert_array_equal(to_values(inpl2, wd), ref)
    np.testing.assert_array_equal(mine, to_storage(blocks[r], wd, npt))


def a2av_count(src, dst):
    # elements rank src sends rank dst: 0 to 3, zeros among them
    return (src + 2 * dst) % 4


def a2av_block(src, dst, n=None):
    n = a2av_count(src, dst) if n is None else n
    return (16.0 * src + 4 * dst + np.arange(n)) % 120


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_alltoallv(comm, wd, npt):
    p, r = comm.size, comm.rank
    dt = pass_dtype(wd)
    sc = [a2av_count(r, q) for q in range(p)]
    rc = [a2av_count(q, r) for q in range(p)]
    sblocks = [a2av_block(r, q) for q in range(p)]
    rblocks = [a2av_block(q, r) for q in range(p)]
    # default displacements, blocking
    send = to_storage(np.concatenate(sblocks), wd, npt)
    recv = to_storage(np.full(sum(rc), SENTINEL), wd, npt)
    ret = comm.alltoallv(send, sc, recv, rc, dtype=dt)
    # gaps on both sides, the blocks in other orders than the ranks'; the
    # send side's gaps hold values that must not travel
    sd, slen = gapped_displs(sc, [(q + 1) % p for q in range(p)])
    rd, rlen = gapped_displs(rc, list(reversed(range(p))))
    gsend = placed(sblocks, sd, slen)
    gsend[gsend == SENTINEL] = 7
    gsend = to_storage(gsend, wd, npt)
    grecv = to_storage(np.full(rlen, SENTINEL), wd, npt)
    got = comm.ialltoallv(gsend, tuple(sc), grecv, rc, sd, rd, dtype=dt).wait()
    # in place: the counts must be symmetric (what r sends q is what q sends r)
    sym = [(r + q) % 3 for q in range(p)]
    id_, ilen = gapped_displs(sym, list(range(p)))
    inpl = to_storage(placed([a2av_block(r, q, sym[q]) for q in range(p)], id_, ilen), wd, npt)
    comm.alltoallv(weft.IN_PLACE, None, inpl, sym, recv_displs=id_, dtype=dt)
    inpl2 = to_storage(placed([a2av_block(r, q, sym[q]) for q in range(p)], id_, ilen), wd, npt)
    comm.ialltoallv(weft.IN_PLACE, None, inpl2, sym, None, id_, dtype=dt).wait()
    assert ret is recv and got is grecv
    np.testing.assert_array_equal(to_values(recv, wd), np.concatenate(rblocks))
    np.testing.assert_array_equal(to_values(grecv, wd), placed(rblocks, rd, rlen))
    iref = placed([a2av_block(q, r, sym[q]) for q in range(p)], id_, ilen)
    np.testing.assert_array_equal(to_values(inpl, wd), iref)
    np.testing.assert_array_equal(to_values(inpl2, wd), iref)
    np.testing.assert_array_equal(send, to_storage(np.concatenate(sblocks), wd, npt))


def test_v_empty_and_single_rank_blocks(comm):
    # every count zero; one rank alone sending; buffers of other shapes (2-D,
    # a bytearray), counts in elements of the whole (flattened) array
    p, r = comm.size, comm.rank
    empty = np.zeros(0, np.float32)
    out = np.full(3, SENTINEL, np.float32)
    comm.allgatherv(empty, out, [0] * p, [1] * p)
    comm.ialltoallv(empty, [0] * p, out, [0] * p).wait()
    counts = [6 if q == p - 1 else 0 for q in range(p)]
    mine = np.arange(6, dtype=np.int16).reshape(2, 3) * (r + 1) if r == p - 1 \
        else np.zeros((0, 3), np.int16)
    grid = np.zeros((2, 3), np.int16)
    comm.allgatherv(mine, grid, counts)
    ba = bytearray(b"\xff" * (p + 1))
    comm.allgatherv(bytes([r + 1]), ba, [1] * p, [q + 1 for q in range(p)])
    assert (out == SENTINEL).all()
    np.testing.assert_array_equal(grid, np.arange(6).reshape(2, 3) * p)
    assert list(ba) == [255] + [q + 1 for q in range(p)]


def test_v_types_without_weft_datatype(comm):
    """allgatherv and alltoallv of arrays Weft has no datatype for (complex64,
    bool, records) move their bytes; counts and displacements stay in the
    array's elements."""
    p, r = comm.size, comm.rank
    counts = [agv_count(q) for q in range(p)]
    blocks = [(agv_block(q) + 1j * q).astype(np.complex64) for q in range(p)]
    displs, length = gapped_displs(counts, list(reversed(range(p))))
    out = np.full(length, SENTINEL + 1j, np.complex64)
    comm.iallgatherv(blocks[r], out, counts, displs).wait()
    inpl = np.full(length, SENTINEL + 1j, np.complex64)
    inpl[displs[r]:displs[r] + counts[r]] = blocks[r]
    comm.allgatherv(weft.IN_PLACE, inpl, counts, displs)
    ref = np.full(length, SENTINEL + 1j, np.complex64)
    for q in range(p):
        ref[displs[q]:displs[q] + counts[q]] = blocks[q]
    # alltoallv of complex64 with gaps on the receiving side
    sc = [a2av_count(r, q) for q in range(p)]
    rc = [a2av_count(q, r) for q in range(p)]
    send = np.concatenate([a2av_block(r, q) * (1 + 1j) for q in range(p)]).astype(np.complex64)
    rd, rlen = gapped_displs(rc, list(range(p)))
    recv = np.full(rlen, -1j, np.complex64)
    comm.alltoallv(send, sc, recv, rc, None, rd)
    a2a_ref = np.full(rlen, -1j, np.complex64)
    for q in range(p):
        a2a_ref[rd[q]:rd[q] + rc[q]] = a2av_block(q, r) * (1 + 1j)
    # bool and records, in place
    flags = np.arange(p) < r  # block q (what goes to rank q): r > q
    comm.ialltoallv(weft.IN_PLACE, None, flags, [1] * p).wait()  # symmetric: one each
    rec = np.zeros(p, dtype=[("a", "i4"), ("b", "f8")])
    rec["a"][r], rec["b"][r] = r, r / 2
    comm.allgatherv(weft.IN_PLACE, rec, [1] * p)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(inpl, ref)
    np.testing.assert_array_equal(recv, a2a_ref)
    np.testing.assert_array_equal(flags, np.arange(p) > r)  # from rank q: q > r
    np.testing.assert_array_equal(rec["a"], np.arange(p))
    np.testing.assert_array_equal(rec["b"], np.arange(p) / 2)

def refusals(cases):
    """Run each (name, wanted status, call) of cases: [(name, the status it
    raised, or None when it returned)]."""
    got = []
    for name, _, fn in cases:
        try:
            fn()
            got.append((name, None))
        except weft.WeftError as e:
            got.append((name, e.status))
    return got


def test_v_bad_input_raises(comm):
    """Arguments the Python layer refuses before calling Weft (on every rank
    alike, so that none is left in a collective): WeftError with the status."""
    p, r = comm.size, comm.rank
    f32 = np.zeros(4, np.float32)
    buf = np.zeros(4 * p, np.float32)
    ones = [1] * p
    cases = [
        ("counts too short", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, ones[:-1])),
        ("counts too long", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, ones + [1])),
        ("negative count", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, [1] * (p - 1) + [-1])),
        ("float count", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, [1.0] * p)),
        ("counts not a sequence", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, 1)),
        ("displs too long", weft.ERR_INVALID_ARG,
         lambda: comm.iallgatherv(f32[:1], buf, ones, list(range(p + 1)))),
        ("negative displ", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, ones, [-1] * p)),
        ("recvbuf too small", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf[:p - 1], ones)),
        ("block past the end", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], buf, ones, [4 * p - q for q in range(p)])),
        ("sendbuf not counts[rank]", weft.ERR_INVALID_ARG,
         lambda: comm.iallgatherv(f32[:2], buf, ones)),
        ("dtypes differ", weft.ERR_DATATYPE,
         lambda: comm.allgatherv(np.zeros(1, np.float64), buf, ones)),
        ("bytes and complex64", weft.ERR_DATATYPE,
         lambda: comm.allgatherv(np.zeros(8, np.uint8), np.zeros(p, np.complex64), ones)),
        ("complex64 and complex128", weft.ERR_DATATYPE,
         lambda: comm.alltoallv(np.zeros(p, np.complex64), ones, np.zeros(p, np.complex128),
                                ones)),
        ("read-only recvbuf", weft.ERR_INVALID_ARG,
         lambda: comm.allgatherv(f32[:1], bytes(4 * p), ones, dtype=weft.FLOAT32)),
        ("a2a send_counts too long", weft.ERR_INVALID_ARG,
         lambda: comm.alltoallv(buf, ones + [0], buf.copy(), ones)),
        ("a2a recv_counts too short", weft.ERR_INVALID_ARG,
         lambda: comm.ialltoallv(buf, ones, buf.copy(), ones[1:])),
        ("a2a send_counts None", weft.ERR_INVALID_ARG,
         lambda: comm.alltoallv(buf, None, buf.copy(), ones)),
        ("a2a sendbuf too small", weft.ERR_INVALID_ARG,
         lambda: comm.alltoallv(buf[:p - 1], ones, buf.copy(), ones)),
        ("a2a recvbuf too small", weft.ERR_INVALID_ARG,
         lambda: comm.ialltoallv(buf, [2] * p, buf[:2 * p - 1].copy(), [2] * p)),
        ("a2a own block differs", weft.ERR_INVALID_ARG,
         lambda: comm.alltoallv(buf, [2 if q == r else 1 for q in range(p)], buf.copy(), ones)),
        ("a2a send_displs past the end", weft.ERR_INVALID_ARG,
         lambda: comm.alltoallv(buf, ones, buf.copy(), ones, [4 * p] * p)),
    ]
    if p > 1:
        cases.append(("recv blocks overlap", weft.ERR_INVALID_ARG,
                      lambda: comm.allgatherv(f32[:2], buf, [2] * p, [q for q in range(p)])))
        cases.append(("a2a recv blocks overlap", weft.ERR_INVALID_ARG,
                      lambda: comm.alltoallv(buf, ones, buf.copy(), ones, None, [0] * p)))
    got = refusals(cases)
    # the communicator is still in step
    out = np.zeros(p, np.int32)
    comm.allgatherv(np.array([r], np.int32), out, ones)
    assert list(out) == list(range(p))
    assert got == [(n, w) for n, w, _ in cases]
    assert comm.algorithm("allgatherv", 100) == "ring"
    assert comm.algorithm("alltoallv", 100) == "pairwise"


# ---- rooted vector collectives (gatherv, scatterv) ---------------------------------
def rv_count(q, root):
    # rank q's block when `root` is the root: 3, 0, 2, 4 shifted by the root,
    # so that the zero falls on another rank (the root included) each time
    return agv_count((q + root) % 4)


def rv_block(q, root):
    return np.arange(rv_count(q, root)) + 10.0 * q + root + 1


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
def test_gatherv_scatterv(comm, wd, npt):
    p, r = comm.size, comm.rank
    dt = pass_dtype(wd)
    got = []  # (name, have, want): asserted after every rank's calls
    for root in range(p):
        me = r == root
        counts = [rv_count(q, root) for q in range(p)]
        blocks = [rv_block(q, root) for q in range(p)]
        mine = to_storage(blocks[r], wd, npt)
        displs, length = gapped_displs(counts, [(q + root) % p for q in range(p)])
        ref = placed(blocks, displs, length)
        # gatherv: default displacements, blocking; the other ranks pass
        # neither recvbuf nor counts
        out = to_storage(np.full(sum(counts), SENTINEL), wd, npt) if me else None
        ret = comm.gatherv(mine, out, counts if me else None, root=root, dtype=dt)
        # explicit displacements with gaps, counts and displs as numpy arrays
        # (the other ranks pass them too: ignored there); nonblocking
        gap = to_storage(np.full(length, SENTINEL), wd, npt) if me else None
        req = comm.igatherv(mine, gap, np.array(counts, np.int64), np.array(displs),
                            root=root, dtype=dt)
        gret = req.wait()
        # in place at the root: its block already at displs[root]
        own = [blocks[q] if q == r else [] for q in range(p)]
        inpl = to_storage(placed(own, displs, length), wd, npt) if me else None
        comm.gatherv(weft.IN_PLACE if me else mine, inpl, counts, displs, root=root, dtype=dt)
        inpl2 = to_storage(placed(own, displs, length), wd, npt) if me else None
        comm.igatherv(weft.IN_PLACE if me else mine, inpl2, counts, displs, root,
                      dt).wait()
        if me:
            got.append(("gatherv returns recvbuf", ret is out and gret is gap, True))
            got.append(("gatherv", to_values(out, wd), np.concatenate(blocks)))
            got.append(("igatherv gaps", to_values(gap, wd), ref))
            got.append(("gatherv in place", to_values(inpl, wd), ref))
            got.append(("igatherv in place", to_values(inpl2, wd), ref))
        else:
            got.append(("gatherv returns None", ret is None and gret is None, True))
        got.append(("gatherv sendbuf untouched", mine, to_storage(blocks[r], wd, npt)))

        # scatterv: default displacements, blocking
        full = to_storage(np.concatenate(blocks), wd, npt) if me else None
        sout = to_storage(np.full(counts[r], SENTINEL), wd, npt)
        ret = comm.scatterv(full, counts if me else None, sout, root=root, dtype=dt)
        # gaps in the root's sendbuf hold values that must not travel; nonblocking
        if me:
            gsend = placed(blocks, displs, length)
            gsend[gsend == SENTINEL] = 7
            gsend = to_storage(gsend, wd, npt)
        else:
            gsend = None
        gout = to_storage(np.full(counts[r], SENTINEL), wd, npt)
        sret = comm.iscatterv(gsend, tuple(counts) if me else None, gout,
                              np.array(displs) if me else None, root=root, dtype=dt).wait()
        # in place at the root: its block stays in sendbuf
        iout = weft.IN_PLACE if me else to_storage(np.full(counts[r], SENTINEL), wd, npt)
        comm.iscatterv(gsend, counts, iout, displs, root=root, dtype=dt).wait()
        iout2 = weft.IN_PLACE if me else to_storage(np.full(counts[r], SENTINEL), wd, npt)
        comm.scatterv(gsend, counts, iout2, displs, root, dt)
        got.append(("scatterv returns recvbuf", ret is sout and sret is gout, True))
        got.append(("scatterv", to_values(sout, wd), blocks[r]))
        got.append(("iscatterv gaps", to_values(gout, wd), blocks[r]))
        if me:
            gref = placed(blocks, displs, length)
            gref[gref == SENTINEL] = 7
            got.append(("scatterv sendbuf untouched", to_values(gsend, wd), gref))
            got.append(("scatterv sendbuf untouched (default displs)", to_values(full, wd),
                        np.concatenate(blocks)))
        else:
            got.append(("iscatterv in place", to_values(iout, wd), blocks[r]))
            got.append(("scatterv in place", to_values(iout2, wd), blocks[r]))
    for name, have, want in got:
        np.testing.assert_array_equal(have, want, err_msg=name)


def test_rooted_v_types_without_weft_datatype(comm):
    """gatherv and scatterv of arrays Weft has no datatype for (complex64,
    bool, records) move their bytes; counts and displacements stay in the
    array's elements."""
    p, r = comm.size, comm.rank
    got = []
    for root in range(p):
        me = r == root
        counts = [rv_count(q, root) for q in range(p)]
        blocks = [(rv_block(q, root) + 1j * q).astype(np.complex64) for q in range(p)]
        displs, length = gapped_displs(counts, list(reversed(range(p))))
        ref = np.full(length, SENTINEL + 1j, np.complex64)
        for q in range(p):
            ref[displs[q]:displs[q] + counts[q]] = blocks[q]
        out = np.full(length, SENTINEL + 1j, np.complex64) if me else None
        comm.igatherv(blocks[r], out, counts, displs, root=root).wait()
        if me:
            inpl = np.full(length, SENTINEL + 1j, np.complex64)
            inpl[displs[r]:displs[r] + counts[r]] = blocks[r]
            comm.gatherv(weft.IN_PLACE, inpl, counts, displs, root=root)
            got += [("complex64 gatherv", out, ref), ("complex64 gatherv in place", inpl, ref)]
        else:
            comm.gatherv(blocks[r], root=root)
        # scatterv of complex64 from the gapped buffer (2-D at the root: counts
        # in elements of the flattened array)
        send = ref.copy().reshape(1, length) if me else None
        recv = np.full(counts[r], -1j, np.complex64)
        comm.scatterv(send, counts, recv, displs, root=root)
        got.append(("complex64 scatterv", recv, blocks[r]))
        # bool in place at the root, records to every rank
        flags = np.arange(p) < root if me else None  # rank q gets root > q
        fl = weft.IN_PLACE if me else np.zeros(1, bool)
        comm.iscatterv(flags, [1] * p, fl, root=root).wait()
        if not me:
            got.append(("bool scatterv", fl, [root > r]))
        rec = np.zeros(2 * p, dtype=[("a", "i4"), ("b", "f8")]) if me else None
        if me:
            rec["a"], rec["b"] = np.arange(2 * p), np.arange(2 * p) / 2
        mine = np.zeros(1, dtype=[("a", "i4"), ("b", "f8")])
        comm.scatterv(rec, [1] * p if me else None, mine, [2 * q + 1 for q in range(p)], root)
        got.append(("records scatterv", (mine["a"][0], mine["b"][0]), (2 * r + 1, r + 0.5)))
    for name, have, want in got:
        np.testing.assert_array_equal(have, want, err_msg=name)


def test_rooted_v_bad_input_raises(comm):
    """Arguments the Python layer refuses before calling Weft. The root alone
    checks the lists (as in MPI): in the root-only cases the other ranks pass
    IN_PLACE, which is for the root only, so that every rank refuses its call
    and none is left in a collective."""
    p, r = comm.size, comm.rank
    root = p - 1
    me = r == root
    f32 = np.zeros(4, np.float32)
    buf = np.zeros(4 * p, np.float32)
    ones = [1] * p

    def gv(*a, **k):  # a gatherv refused at the root by (a, k), elsewhere by IN_PLACE
        if not me:
            return lambda: comm.gatherv(weft.IN_PLACE, root=root)
        return lambda: comm.gatherv(*a, root=root, **k)

    def sv(*a, **k):  # the same for iscatterv
        if not me:
            return lambda: comm.iscatterv(None, None, weft.IN_PLACE, root=root)
        return lambda: comm.iscatterv(*a, root=root, **k)

    inv = weft.ERR_INVALID_ARG
    dty = weft.ERR_DATATYPE if me else inv  # a dtype mismatch seen at the root
    cases = [
        # every rank
        ("root out of range", inv, lambda: comm.gatherv(f32[:1], buf, ones, root=p)),
        ("negative root", inv, lambda: comm.iscatterv(buf, ones, f32[:1], root=-1)),
        ("read-only recvbuf", inv,
         lambda: comm.scatterv(buf if me else None, ones, bytes(4), root=root,
                               dtype=weft.FLOAT32)),
        # the root
        ("gatherv recvbuf None", inv, gv(f32[:1], None, ones)),
        ("gatherv counts None", inv, gv(f32[:1], buf, None)),
        ("gatherv counts too short", inv, gv(f32[:1], buf, ones[:-1])),
        ("gatherv negative count", inv, gv(f32[:1], buf, [1] * (p - 1) + [-1])),
        ("gatherv float count", inv, gv(f32[:1], buf, [1.0] * p)),
        ("gatherv displs too long", inv, gv(f32[:1], buf, ones, list(range(p + 1)))),
        ("gatherv recvbuf too small", inv, gv(f32[:1], buf[:p - 1], ones)),
        ("gatherv block past the end", inv,
         gv(f32[:1], buf, ones, [4 * p - q for q in range(p)])),
        ("gatherv sendbuf not counts[root]", inv, gv(f32[:2], buf, ones)),
        ("gatherv dtypes differ", dty, gv(np.zeros(1, np.float64), buf, ones)),
        ("gatherv bytes and complex64", dty,
         gv(np.zeros(8, np.uint8), np.zeros(p, np.complex64), ones)),
        ("gatherv read-only recvbuf", inv, gv(f32[:1], bytes(4 * p), ones, dtype=weft.FLOAT32)),
        ("scatterv sendbuf None", inv, sv(None, ones, f32[:1])),
        ("scatterv counts None", inv, sv(buf, None, f32[:1])),
        ("scatterv counts too long", inv, sv(buf, ones + [1], f32[:1])),
        ("scatterv negative displ", inv, sv(buf, ones, f32[:1], [-1] * p)),
        ("scatterv sendbuf too small", inv, sv(buf[:p - 1], ones, f32[:1])),
        ("scatterv block past the end", inv, sv(buf, ones, f32[:1], [4 * p] * p)),
        ("scatterv recvbuf not counts[root]", inv, sv(buf, ones, f32[:2])),
        ("scatterv dtypes differ", dty, sv(buf, ones, np.zeros(1, np.int32))),
        ("scatterv complex64 and complex128", dty,
         sv(np.zeros(p, np.complex64), ones, np.zeros(1, np.complex128))),
    ]
    if p > 1:
        cases.append(("gatherv recv blocks overlap", inv,
                      gv(f32[:2], buf, [2] * p, [q for q in range(p)])))
    got = refusals(cases)
    # the communicator is still in step
    out = np.zeros(p, np.int32) if me else None
    comm.gatherv(np.array([r], np.int32), out, ones, root=root)
    back = np.zeros(1, np.int32)
    comm.scatterv(out, ones, back, root=root)
    assert got == [(n, w) for n, w, _ in cases]
    assert back[0] == r
    assert comm.algorithm("gatherv", 100) == "linear"
    assert comm.algorithm("scatterv", 100) == "linear"


# ---- reduce_scatterv (MPI_Reduce_scatter) -------------------------------------------
def rsv_counts(p):
    # rank q's block: 3, 0, 2, 4 elements for ranks 0..3 (a zero among them)
    return [agv_count(q) for q in range(p)]


def rsv_input(op, r, total):
    """Rank r's vector: for PROD, rank_values (products stay small); for the
    others, values 1..11 that vary along the vector and with the rank, so
    that a block landing on the wrong rank shows."""
    if op == weft.PROD:
        return rank_values(r, total)
    return ((np.arange(total) * 7 + 3 * r) % 11 + 1).astype(np.float64)


def rsv_ref(op, inputs):
    """The element-wise reduction of every rank's vector (float64; exact)."""
    vals = np.stack(inputs)
    return {weft.SUM: vals.sum, weft.PROD: vals.prod, weft.MIN: vals.min,
            weft.MAX: vals.max}[op](0)


@pytest.mark.parametrize("wd,npt", DTYPES, ids=[weft.datatype_name(d) for d, _ in DTYPES])
@pytest.mark.parametrize("op", [weft.SUM, weft.PROD, weft.MIN, weft.MAX],
                         ids=["sum", "prod", "min", "max"])
def test_reduce_scatterv(comm, wd, npt, op):
    p, r = comm.size, comm.rank
    dt = pass_dtype(wd)
    counts = rsv_counts(p)
    total, off = sum(counts), sum(counts[:r])
    inputs = [rsv_input(op, q, total) for q in range(p)]  # every rank's, computed here
    ref = rsv_ref(op, inputs)[off:off + counts[r]]
    mine = to_storage(inputs[r], wd, npt)
    # blocking, counts as a list
    out = to_storage(np.full(counts[r], SENTINEL), wd, npt)
    ret = comm.reduce_scatterv(mine, out, counts, op=op, dtype=dt)
    # nonblocking, counts as a numpy array
    out2 = to_storage(np.full(counts[r], SENTINEL), wd, npt)
    got = comm.ireduce_scatterv(mine, out2, np.array(counts, np.int64), op, dt).wait()
    # in place: the input is recvbuf, the whole vector; the result at its start
    inpl = to_storage(inputs[r], wd, npt)
    comm.reduce_scatterv(weft.IN_PLACE, inpl, counts, op=op, dtype=dt)
    inpl2 = to_storage(inputs[r], wd, npt)
    req = comm.ireduce_scatterv(weft.IN_PLACE, inpl2, tuple(counts), op=op, dtype=dt)
    got2 = req.wait()
    assert ret is out and got is out2 and got2 is inpl2
    np.testing.assert_array_equal(to_values(out, wd), ref)
    np.testing.assert_array_equal(to_values(out2, wd), ref)
    np.testing.assert_array_equal(to_values(inpl[:counts[r]], wd), ref)
    np.testing.assert_array_equal(to_values(inpl2[:counts[r]], wd), ref)
    np.testing.assert_array_equal(mine, to_storage(inputs[r], wd, npt))


@pytest.mark.parametrize("op,fn", [(weft.BAND, np.bitwise_and), (weft.BOR, np.bitwise_or),
                                   (weft.BXOR, np.bitwise_xor)], ids=["band", "bor", "bxor"])
@pytest.mark.parametrize("npt", [np.int8, np.uint16, np.int32, np.uint64])
def test_reduce_scatterv_bitwise(comm, op, fn, npt):
    p, r = comm.size, comm.rank
    counts = [(q * 5 + 1) % 4 for q in range(p)]  # 1, 2, 3, 0
    total, off = sum(counts), sum(counts[:r])
    vals = [((np.arange(total) * 7 + 3 * q + 1) % 100).astype(npt) for q in range(p)]
    out = np.zeros(counts[r], npt)
    comm.ireduce_scatterv(vals[r], out, counts, op=op).wait()
    ref = vals[0]
    for v in vals[1:]:
        ref = fn(ref, v)
    np.testing.assert_array_equal(out, ref[off:off + counts[r]])


def test_reduce_scatterv_float16_sum(comm):
    # values that are not small integers: float16 rounds each partial sum,
    # and the order of the additions is Weft's, so the result is compared
    # with a tolerance (each operand is exact in float16)
    p, r = comm.size, comm.rank
    counts = [(5 * q + 2) % 7 for q in range(p)]  # 2, 0, 5, 3
    total, off = sum(counts), sum(counts[:r])
    inputs = [((np.arange(total) * 0.37 + q * 1.13) % 5).astype(np.float16) for q in range(p)]
    out = np.zeros(counts[r], np.float16)
    comm.reduce_scatterv(inputs[r], out, counts)
    ref = np.sum([x.astype(np.float64) for x in inputs], 0)[off:off + counts[r]]
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-3 * p, atol=1e-2)


def test_reduce_scatterv_sizes_and_kinds(comm):
    # blocks past the ring's chunk (256 KiB) with a zero among them; every
    # count zero; a 2-D recvbuf and sendbuf (counts in elements of the
    # flattened arrays); a rank that alone gets everything
    p, r = comm.size, comm.rank
    counts = [(70001, 0, 33333, 100003)[q % 4] for q in range(p)]
    total, off = sum(counts), sum(counts[:r])
    x = (np.arange(total, dtype=np.float64) % 1000) * (r + 1)
    out = np.full(counts[r], -1.0)
    comm.reduce_scatterv(x, out, counts)
    big = np.arange(total, dtype=np.float32) % 97 + r
    comm.ireduce_scatterv(weft.IN_PLACE, big, counts, op=weft.MAX).wait()
    empty_out = np.full(0, -1.0, np.float32)
    comm.reduce_scatterv(np.zeros(0, np.float32), empty_out, [0] * p)
    comm.reduce_scatterv(weft.IN_PLACE, np.zeros(0, np.int32), [0] * p)
    last = [6 if q == p - 1 else 0 for q in range(p)]
    grid_in = np.arange(6, dtype=np.int16).reshape(2, 3) * (r + 1)
    grid = np.zeros((2, 3), np.int16) if r == p - 1 else np.zeros((0, 3), np.int16)
    comm.reduce_scatterv(grid_in, grid, last)
    mul = p * (p + 1) / 2
    np.testing.assert_array_equal(out, (np.arange(total) % 1000)[off:off + counts[r]] * mul)
    np.testing.assert_array_equal(big[:counts[r]],
                                  (np.arange(total) % 97 + p - 1)[off:off + counts[r]])
    if r == p - 1:
        np.testing.assert_array_equal(grid, np.arange(6).reshape(2, 3) * mul)


def test_reduce_scatterv_bad_input_raises(comm):
    """Arguments refused on every rank alike (the lists are the same on every
    rank, and every rank passes the same kind of bad buffer), so that none is
    left in a collective: WeftError with the status. AVG is refused by
    libweft (ERR_UNSUPPORTED), blocking and nonblocking."""
    p, r = comm.size, comm.rank
    counts = [q % 3 + 1 for q in range(p)]  # no zero: every recvbuf has elements
    total, mine = sum(counts), counts[r]
    x = np.ones(total, np.float32)
    out = np.zeros(mine, np.float32)
    inv = weft.ERR_INVALID_ARG
    cases = [
        ("counts too short", inv, lambda: comm.reduce_scatterv(x, out, counts[:-1])),
        ("counts too long", inv, lambda: comm.ireduce_scatterv(x, out, counts + [0])),
        ("negative count", inv,
         lambda: comm.reduce_scatterv(x, out, counts[:-1] + [-counts[-1]])),
        ("float count", inv, lambda: comm.reduce_scatterv(x, out, [float(c) for c in counts])),
        ("counts None", inv, lambda: comm.reduce_scatterv(x, out, None)),
        ("sendbuf not sum(counts)", inv, lambda: comm.reduce_scatterv(x[:-1], out, counts)),
        ("sendbuf longer than sum(counts)", inv,
         lambda: comm.ireduce_scatterv(np.ones(total + 1, np.float32), out, counts)),
        ("recvbuf not counts[rank]", inv,
         lambda: comm.reduce_scatterv(x, np.zeros(mine + 1, np.float32), counts)),
        ("in place recvbuf not the vector", inv,
         lambda: comm.reduce_scatterv(weft.IN_PLACE, x.copy()[:-1], counts)),
        ("in place recvbuf counts[rank] only", inv,
         lambda: comm.ireduce_scatterv(weft.IN_PLACE, out, counts) if total != mine
         else comm.ireduce_scatterv(weft.IN_PLACE, out[:0], counts)),
        ("read-only recvbuf", inv,
         lambda: comm.reduce_scatterv(x, bytes(4 * mine), counts, dtype=weft.FLOAT32)),
        ("dtypes differ", weft.ERR_DATATYPE,
         lambda: comm.reduce_scatterv(x.astype(np.float64), out, counts)),
        ("complex64 (no Weft datatype)", weft.ERR_DATATYPE,
         lambda: comm.reduce_scatterv(np.ones(total, np.complex64),
                                      np.zeros(mine, np.complex64), counts)),
        ("bool (no Weft datatype)", weft.ERR_DATATYPE,
         lambda: comm.ireduce_scatterv(np.ones(total, bool), np.zeros(mine, bool), counts)),
        ("unknown op", weft.ERR_OP, lambda: comm.reduce_scatterv(x, out, counts, op=99)),
        ("band of float32", weft.ERR_DATATYPE,
         lambda: comm.reduce_scatterv(x, out, counts, op=weft.BAND)),
        ("avg", weft.ERR_UNSUPPORTED, lambda: comm.reduce_scatterv(x, out, counts, op=weft.AVG)),
        ("iavg", weft.ERR_UNSUPPORTED,
         lambda: comm.ireduce_scatterv(x, out, counts, op="avg").wait()),
        ("avg in place", weft.ERR_UNSUPPORTED,
         lambda: comm.reduce_scatterv(weft.IN_PLACE, x.copy(), counts, op=weft.AVG)),
    ]
    got = refusals(cases)
    # the communicator is still in step
    ok = np.zeros(mine, np.float32)
    comm.reduce_scatterv(x, ok, counts)
    assert got == [(n, w) for n, w, _ in cases]
    assert (ok == p).all()
    assert comm.algorithm("reduce_scatterv", 100) == "ring"


