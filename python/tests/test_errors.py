"""Bad input raises weft.WeftError (status, name, weft_strerror's text) and
crashes nothing; the communicator still works afterwards. The last test
finalises Weft (MPI cannot start again in this process), so it runs last."""

import numpy as np
import pytest

import weft
from weft import _lib


def strerror(st):
    return _lib.weft_strerror(st).decode()


def raises(status, fn, *args, **kw):
    with pytest.raises(weft.WeftError) as ei:
        fn(*args, **kw)
    e = ei.value
    assert e.status == status, str(e)
    assert e.name == _lib.weft_status_name(status).decode()
    assert e.strerror == strerror(status)
    assert e.name in str(e) and e.strerror in str(e)
    return e


def test_wrong_dtype(comm):
    x = np.ones(4, dtype=np.float32)
    raises(weft.ERR_DATATYPE, comm.allreduce, x, np.zeros(4, dtype=np.float64))
    raises(weft.ERR_DATATYPE, comm.allreduce, np.ones(4, dtype=np.complex64))
    raises(weft.ERR_DATATYPE, comm.allreduce, np.ones(4, dtype=np.float128))
    raises(weft.ERR_DATATYPE, comm.allreduce, np.ones(2, dtype=">f4"))  # bcast moves its bytes
    # a bitwise operation on floats: refused by libweft itself
    e = raises(weft.ERR_DATATYPE, comm.allreduce, x, op=weft.BXOR)
    assert "weft_allreduce" in str(e)
    # element size and dtype= disagree
    raises(weft.ERR_DATATYPE, comm.allreduce, x, dtype=weft.FLOAT64)
    raises(weft.ERR_DATATYPE, comm.allreduce, x, dtype="complex")
    raises(weft.ERR_OP, comm.allreduce, x, op=42)
    raises(weft.ERR_OP, comm.allreduce, x, op="median")


def test_not_contiguous_or_read_only(comm):
    x = np.ones(8, dtype=np.float32)
    raises(weft.ERR_INVALID_ARG, comm.allreduce, x[::2])
    raises(weft.ERR_INVALID_ARG, comm.allreduce, np.ones((4, 4))[:, 1])
    ro = np.ones(4)
    ro.flags.writeable = False
    raises(weft.ERR_INVALID_ARG, comm.allreduce, ro)
    raises(weft.ERR_INVALID_ARG, comm.bcast, b"abcd")  # bytes: read-only
    raises(weft.ERR_INVALID_ARG, comm.allreduce, "not an array")
    raises(weft.ERR_INVALID_ARG, comm.allreduce, None)
    # a cached array made read-only afterwards is refused too
    y = np.ones(4)
    comm.allreduce(y)
    y.flags.writeable = False
    raises(weft.ERR_INVALID_ARG, comm.allreduce, y)


def test_size_mismatch(comm):
    p = comm.size
    raises(weft.ERR_INVALID_ARG, comm.allreduce, np.ones(4), np.zeros(3))
    raises(weft.ERR_INVALID_ARG, comm.allgather, np.ones(2), np.zeros(2 * p + 1))
    raises(weft.ERR_INVALID_ARG, comm.reduce_scatter, np.ones(3 * p + 1), np.zeros(3))
    raises(weft.ERR_INVALID_ARG, comm.alltoall, np.ones(p * 2), np.zeros(p * 2 + 1))
    raises(weft.ERR_INVALID_ARG, comm.bcast, np.ones(2), root=p)
    raises(weft.ERR_INVALID_ARG, comm.send, np.ones(2), p)
    raises(weft.ERR_INVALID_ARG, comm.reduce, np.ones(2), None, root=-1)


def test_algorithm_query(comm):
    raises(weft.ERR_INVALID_ARG, comm.algorithm, "allreduse", 4)
    raises(weft.ERR_INVALID_ARG, comm.algorithm, "allreduce", -1)
    raises(weft.ERR_DATATYPE, comm.algorithm, "allreduce", 4, "complex64")
    # the choice follows WEFT_<COLL>_ALGO as the collective itself does
    assert comm.algorithm("barrier", 0) == "dissemination"
    assert comm.algorithm("gather", 10, weft.INT8) == "linear"
    assert comm.algorithm("allreduce", 1 << 20) in ("ring", "recursive_doubling",
                                                    "rabenseifner", "tree", "mpi",
                                                    "reduce_bcast", "shm")


def test_comm_still_works(comm):
    x = np.ones(5, dtype=np.int64)
    comm.allreduce(x)
    assert (x == comm.size).all()


def test_freed_comm(comm):
    c = comm.split(0, comm.rank)
    c.free()
    raises(weft.ERR_INVALID_COMM, c.allreduce, np.ones(2))
    raises(weft.ERR_INVALID_COMM, c.barrier)
    c.free()  # freeing again is a no-op
    # the C handle itself is generation-checked: a stale copy of it is refused
    c2 = comm.split(0, comm.rank)
    stale = weft.Comm.__new__(weft.Comm)
    stale._h, stale.rank, stale.size, stale._dev = c2.handle, c2.rank, c2.size, False
    c2.free()
    raises(weft.ERR_INVALID_COMM, stale.allreduce, np.ones(2))
    raises(weft.ERR_INVALID_COMM, stale.ibarrier)


def test_finalized_library(comm):
    x = np.ones(4)
    req = comm.iallreduce(x)
    req.wait()
    weft.finalize()
    assert not weft.initialized()
    raises(weft.ERR_NOT_INITIALIZED, comm.allreduce, x)
    raises(weft.ERR_NOT_INITIALIZED, comm.iallreduce, x)
    raises(weft.ERR_NOT_INITIALIZED, comm.barrier)
    raises(weft.ERR_NOT_INITIALIZED, weft.Comm.world)
    weft.finalize()  # a second finalize is a no-op
