"""Weft from Python: communicators, collectives and point to point over
libweft's C ABI (include/weft.h), through ctypes.

    import numpy as np, weft
    weft.init()
    comm = weft.Comm.world()
    x = np.ones(1024, dtype=np.float32)
    comm.allreduce(x)                       # in place, sum
    req = comm.iallreduce(x, op=weft.MAX)   # nonblocking
    req.wait()
    weft.finalize()

Arrays: numpy arrays, torch CPU tensors, anything with __array_interface__
or the buffer protocol; C-contiguous, writable where Weft writes. Datatypes
come from the array (every Weft datatype: int8 ... float64, float16,
bfloat16), or from dtype= to reinterpret; the calls that only move data take
any other type as its bytes. Errors raise weft.WeftError.
Every call releases the GIL while Weft works or waits.

Thread contract: as weft.h: any thread between init() and finalize(); the
collectives of one communicator issued in one order on every rank.
See doc/python.md.
"""

import atexit
import ctypes
import operator
import sys
import threading

from . import _lib
from ._lib import IN_PLACE_PTR as _INPL
from ._errors import WeftError, check as _check
from ._errors import (SUCCESS, INPROGRESS, ERR_INVALID_ARG, ERR_DATATYPE, ERR_OP,  # noqa: F401
                      ERR_COUNT_OVERFLOW, ERR_NOT_INITIALIZED, ERR_INVALID_REQUEST,
                      ERR_INVALID_COMM, ERR_NO_MEMORY, ERR_THREAD_LEVEL, ERR_MPI, ERR_TIMEOUT,
                      ERR_COMM_BROKEN, ERR_UNSUPPORTED, ERR_ALGORITHM, ERR_TUNING_FILE, ERR_CUDA,
                      ERR_NCCL, ERR_UCX, ERR_STREAM, ERR_HALO_PLAN, ERR_FINALIZING, ERR_INTERNAL)
from ._dtypes import (INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, FLOAT16,
                      BFLOAT16, FLOAT32, FLOAT64, SUM, PROD, MIN, MAX, AVG, BAND, BOR, BXOR)
from . import _dtypes
from ._buffers import resolve as _resolve
from ._request import Request, waitall, MODE as COMPLETION_MODE
from ._bootstrap import init_with_store  # worlds started without an MPI launcher

__version__ = "0.1.0"

#: Pass as the send buffer for the in-place forms (allgather, allgatherv,
#: alltoallv, reduce_scatterv, reduce at the root, gather and gatherv at the
#: root), as the receive buffer of scatter and scatterv at the root.
IN_PLACE = type("InPlace", (), {"__repr__": lambda self: "weft.IN_PLACE"})()
#: Color of a rank that joins no communicator in Comm.split.
UNDEFINED = -1
TRANSPORT_DEFAULT, TRANSPORT_MPI, TRANSPORT_UCX = 0, 1, 2
_TRANSPORTS = {None: 0, "default": 0, "mpi": 1, "ucx": 2, 0: 0, 1: 1, 2: 2}

# in the order of weft_coll_t
_COLLECTIVES = ("allreduce", "reduce_scatter", "allgather", "bcast", "reduce", "alltoall",
                "gather", "scatter", "barrier", "allgatherv", "alltoallv", "gatherv",
                "scatterv", "reduce_scatterv")
_byref = ctypes.byref
_c_request = _lib.c_request
_c_allreduce = _lib.weft_allreduce


def version():
    """The loaded libweft's version string ("0.1.0")."""
    return _lib.weft_version_string().decode()


def library_path():
    """The path of the libweft this package loaded."""
    return _lib.lib._name


def init():
    """Initialise Weft (and MPI with MPI_THREAD_MULTIPLE if nobody has; if
    mpi4py is to be used, import it first). A no-op when initialised.
    Finalised at exit if the program does not call finalize()."""
    _check(_lib.weft_init(None), "weft_init")
    if not _state["atexit"]:
        atexit.register(_finalize_at_exit)
        sys.excepthook = _noting_failure(sys.excepthook)
        sys.exit = _noting_exit(sys.exit)
    _state["atexit"] = True


def finalize():
    """Complete what is in flight, stop Weft's engine and free every
    communicator (and finalise MPI if Weft initialised it; MPI cannot be
    initialised again in this process). Afterwards calls raise WeftError
    WEFT_ERR_NOT_INITIALIZED. Thread: the one that called init()."""
    if not _lib.weft_initialized():
        return
    _check(_lib.weft_finalize(), "weft_finalize")


def initialized():
    return bool(_lib.weft_initialized())


_state = {"atexit": False, "failed": None}  # failed: why this process ends in error


def _noting_failure(hook):
    """sys.excepthook, noting that the process dies of an unhandled exception."""
    def excepthook(kind, value, tb):
        _state["failed"] = "an unhandled exception"
        hook(kind, value, tb)
    excepthook.__wrapped__ = hook  # what reports a non-fatal error (_request.py)
    return excepthook


def _noting_exit(exit_):
    """sys.exit, noting an exit status other than 0 (as Python counts it: None
    and 0 are success, any other int that status, anything else 1). The
    process is taken to end with it: a program that catches the SystemExit
    and goes on (a test runner) should call weft.finalize() itself, or it
    leaves without finalising too. `raise SystemExit(n)` and the interactive
    exit()/quit() are not seen, nor is sys.exit on another thread than the
    main one (it ends that thread only)."""
    def exit(status=None):
        if not (status is None or (isinstance(status, int) and status == 0)) and \
                threading.current_thread() is threading.main_thread():
            _state["failed"] = "sys.exit(%r)" % (status,)
        exit_(status)
    exit.__wrapped__ = exit_
    exit.__doc__ = exit_.__doc__
    return exit


def _finalize_at_exit():
    """At exit, finalise Weft (and MPI), unless an unhandled exception or
    sys.exit with an error status ends the process: MPI_Finalize waits for
    every other rank, which may wait in a collective for this one until
    WEFT_TIMEOUT. So a failed rank leaves without it (memfd segments and
    sockets go with the process), and its launcher sees it end at once:
    mpiexec then ends the job, torchrun stops (or restarts) the workers."""
    if not _lib.weft_initialized():
        return
    if _state["failed"]:
        print("weft: %s: this process leaves without finalising Weft and MPI, "
              "so that its launcher ends the job" % _state["failed"], file=sys.stderr, flush=True)
        return
    _lib.weft_finalize()


def _op(op):
    if type(op) is int and 0 <= op < 8:
        return op
    return _dtypes.check_op(op)


def _same(a, b, what):
    if a.dtype != b.dtype:
        raise WeftError(ERR_DATATYPE, "%s: %s and %s differ" %
                        (what, _dtypes.name(a.dtype), _dtypes.name(b.dtype)))


def _bytes_view(obj):
    """(obj's memory as bytes (same memory, C order), the size of one of obj's
    elements in bytes), or (None, 0) where no view is possible without a copy
    (a copy would lose what Weft writes)."""
    if hasattr(obj, "is_contiguous") and hasattr(obj, "element_size"):  # a torch tensor
        import torch
        return (obj.view(torch.uint8), obj.element_size()) if obj.is_contiguous() else (None, 0)
    if getattr(obj, "__array_interface__", None) is not None:
        import numpy as np
        a = np.asarray(obj)
        if not a.flags.c_contiguous:
            return None, 0
        return (a.reshape(1) if a.ndim == 0 else a).view(np.uint8), a.itemsize
    m = memoryview(obj)
    return (m.cast("B"), m.itemsize) if m.c_contiguous else (None, 0)


def _resolve_moved_scaled(obj, what, writable, dtype, dev):
    """(_resolve_moved's Buf, the number of its elements per element of obj):
    1, or obj's element size where obj moves as its bytes."""
    try:
        return _resolve(obj, what, writable, dtype, dev), 1
    except WeftError as e:
        if dtype is not None or e.status != ERR_DATATYPE:
            raise
        try:
            view, esize = _bytes_view(obj)
        except (TypeError, ValueError):
            view = None
        if view is None:
            raise
        return _resolve(view, what, writable, UINT8, dev), esize


def _resolve_moved(obj, what, writable, dtype, dev):
    """_resolve for calls that only move data (bcast, allgather, alltoall,
    gather, scatter, send, recv, allgatherv, alltoallv, gatherv, scatterv): an
    array whose type Weft has no datatype for (complex, bool, big-endian,
    float8, records, ...) moves as its bytes, which arrive as they left.
    Counts are then in bytes on both sides (the v-forms scale the element
    counts they are given)."""
    return _resolve_moved_scaled(obj, what, writable, dtype, dev)[0]


def _count(buf, n, what):
    if buf.count != n:
        raise WeftError(ERR_INVALID_ARG, "%s holds %d elements, expected %d" %
                        (what, buf.count, n))


def _v_list(values, n, what, coll):
    """A count or displacement list of a vector collective: n integers >= 0
    (a list, tuple, numpy array, ...), or WeftError ERR_INVALID_ARG."""
    try:
        lst = [operator.index(v) for v in values]
    except TypeError:
        raise WeftError(ERR_INVALID_ARG, "%s: %s must be a sequence of %d integers, not %r"
                        % (coll, what, n, values)) from None
    if len(lst) != n:
        raise WeftError(ERR_INVALID_ARG, "%s: %s has %d entries for %d ranks"
                        % (coll, what, len(lst), n))
    for q, v in enumerate(lst):
        if v < 0:
            raise WeftError(ERR_INVALID_ARG, "%s: %s[%d] is %d (negative)" % (coll, what, q, v))
    return lst


def _v_blocks(counts, displs, n, what, dwhat, coll):
    """The counts and displacements (elements) of a vector collective's
    buffer: displs None is the exclusive prefix sum of counts. Returns
    (counts, displs, extent: the elements the buffer must hold)."""
    counts = _v_list(counts, n, what, coll)
    if displs is None:
        displs, off = [], 0
        for c in counts:
            displs.append(off)
            off += c
    else:
        displs = _v_list(displs, n, dwhat, coll)
    # the non-empty blocks within the buffer (an empty block's displacement
    # is never used, as in MPI and Weft's C calls)
    extent = max((d + c for d, c in zip(displs, counts) if c), default=0)
    return counts, displs, extent


def _v_fits(buf, scale, extent, what, coll, counts, displs):
    """buf (scale Weft elements per element of the caller's) holds the blocks
    at counts/displs, which do not overlap; WeftError ERR_INVALID_ARG
    otherwise."""
    have = buf.count // scale
    if have < extent:
        raise WeftError(ERR_INVALID_ARG, "%s: %s holds %d elements, its blocks need %d"
                        % (coll, what, have, extent))
    blocks = sorted((d, c, q) for q, (d, c) in enumerate(zip(displs, counts)) if c)
    for (d0, c0, q0), (d1, _, q1) in zip(blocks, blocks[1:]):
        if d0 + c0 > d1:
            raise WeftError(ERR_INVALID_ARG, "%s: the blocks of ranks %d and %d of %s overlap"
                            % (coll, q0, q1, what))


def _v_same(s, s_scale, r, r_scale, coll):
    _same(s, r, coll)
    if s_scale != r_scale:  # both moved as bytes, or one of them: counts would differ in meaning
        raise WeftError(ERR_DATATYPE, "%s: sendbuf's elements have %d bytes, recvbuf's %d"
                        % (coll, _dtypes.SIZES[s.dtype] * s_scale,
                           _dtypes.SIZES[r.dtype] * r_scale))


def _host_only(buf, coll):
    if buf.device != "cpu":
        raise WeftError(ERR_UNSUPPORTED, "%s takes host memory only, not a %s tensor: copy it "
                        "to the host" % (coll, buf.device))


def _sizes(values, scale):
    """values (elements of the caller's arrays) scaled to Weft's elements,
    as a size_t array for C."""
    return (_lib.N * len(values))(*[v * scale for v in values])


def _v_fn(name):
    f = getattr(_lib, name, None)
    if f is None:
        raise WeftError(ERR_UNSUPPORTED, "%s: the loaded libweft (%s) does not have it"
                        % (name, _lib.lib._name))
    return f


class Comm:
    """A Weft communicator (weft_comm_t). Create with Comm.world(),
    Comm.from_mpi4py(mpi_comm) or comm.split(color, key). Freed by free() (a
    collective call) or by finalize(); never by the garbage collector, since
    freeing is collective."""

    __slots__ = ("_h", "rank", "size", "_dev")

    def __init__(self, handle):
        self._h = handle
        r = ctypes.c_int()
        s = ctypes.c_int()
        _check(_lib.weft_comm_rank(handle, _byref(r)), "weft_comm_rank")
        _check(_lib.weft_comm_size(handle, _byref(s)), "weft_comm_size")
        self.rank = r.value  #: this process's rank
        self.size = s.value  #: number of ranks
        self._dev = False    # takes device memory (bound to a CUDA stream)

    def __repr__(self):
        return "<weft.Comm rank %d of %d>" % (self.rank, self.size)

    @staticmethod
    def _params(transport):
        if transport not in _TRANSPORTS:
            raise WeftError(ERR_INVALID_ARG, "transport %r: expected 'mpi', 'ucx' or None"
                            % (transport,))
        return _lib.CommParams(ctypes.sizeof(_lib.CommParams), _TRANSPORTS[transport])

    @classmethod
    def world(cls, transport=None, stream=None):
        """A communicator over every process of the job (collective over all).
        transport: None (WEFT_TRANSPORT decides), 'mpi' or 'ucx'. stream: a
        weft_stream_t (int) to bind to, or None."""
        h = _lib.c_comm()
        p = cls._params(transport)
        _check(_lib.weft_comm_world(stream, _byref(p), _byref(h)), "weft_comm_world")
        return cls(h.value)

    @classmethod
    def from_mpi4py(cls, mpi_comm, transport=None):
        """A communicator over the processes of an mpi4py communicator (Weft
        duplicates it; collective over it). Import mpi4py before weft.init()
        so that MPI is initialised with MPI_THREAD_MULTIPLE by mpi4py."""
        try:
            f = mpi_comm.py2f()
        except AttributeError:
            raise WeftError(ERR_INVALID_ARG, "from_mpi4py: %r is not an mpi4py communicator"
                            % (mpi_comm,)) from None
        h = _lib.c_comm()
        p = cls._params(transport)
        _check(_lib.weft_comm_create_f(f, None, _byref(p), _byref(h)), "weft_comm_create_f")
        return cls(h.value)

    def split(self, color, key=0):
        """As MPI_Comm_split: a new Comm of the ranks passing the same color
        (>= 0), ordered by key; None for color weft.UNDEFINED. Collective."""
        h = _lib.c_comm()
        _check(_lib.weft_comm_split(self._h, int(color), int(key), None, _byref(h)),
               "weft_comm_split")
        return Comm(h.value) if h.value else None

    def create_group(self, ranks):
        """As MPI_Comm_create_group: a new Comm of the listed ranks of this one,
        numbered in the list's order. Collective over those ranks only (each
        passes the same list, this rank among them); the other ranks take no
        part. A bad list raises WeftError ERR_INVALID_ARG."""
        try:
            lst = [int(q) for q in ranks]
        except (TypeError, ValueError):
            raise WeftError(ERR_INVALID_ARG, "create_group: ranks must be a list of ints, "
                            "not %r" % (ranks,)) from None
        arr = (_lib.I * max(1, len(lst)))(*lst)
        h = _lib.c_comm()
        _check(_lib.weft_comm_create_group(self._h, arr, len(lst), None, _byref(h)),
               "weft_comm_create_group")
        return Comm(h.value)

    def free(self):
        """Destroy the communicator (waits for its operations). Collective."""
        if self._h:
            h, self._h = self._h, None
            _check(_lib.weft_comm_destroy(h), "weft_comm_destroy")

    @property
    def handle(self):
        """The weft_comm_t, as an int (for other ctypes code)."""
        return self._h

    @property
    def transport(self):
        """'mpi' or 'ucx'."""
        t = ctypes.c_int()
        _check(_lib.weft_comm_get_transport(self._h, _byref(t)), "weft_comm_get_transport")
        return _lib.weft_transport_name(t.value).decode()

    def algorithm(self, collective, count, dtype=FLOAT32):
        """The algorithm Weft would run for `collective` ("allreduce",
        "reduce_scatter", "allgather", "bcast", "reduce", "alltoall",
        "gather", "scatter", "barrier", "allgatherv", "alltoallv", "gatherv",
        "scatterv", "reduce_scatterv") of `count` elements (a v-form: the whole vector) of
        `dtype` on this communicator: its name ("ring", "shm", ...), as
        weft_query_algo and weft-info give it. Any thread."""
        try:
            coll = _COLLECTIVES.index(collective)
        except ValueError:
            raise WeftError(ERR_INVALID_ARG, "algorithm: unknown collective %r (one of %s)"
                            % (collective, ", ".join(_COLLECTIVES))) from None
        if not isinstance(count, int) or count < 0:
            raise WeftError(ERR_INVALID_ARG, "algorithm: count %r" % (count,))
        a = ctypes.c_int()
        _check(_lib.weft_query_algo(self._h, coll, count, _dtypes.check(dtype), _byref(a)),
               "weft_query_algo")
        return _lib.weft_algo_name(a.value).decode()

    def get_error(self):
        """The communicator's sticky asynchronous error as a WeftError, or None."""
        st = _lib.weft_comm_get_error(self._h)
        return WeftError(st, "communicator error") if st else None

    # ---- helpers ---------------------------------------------------------
    def _req(self, fn, args, keep, result, name):
        h = _c_request(0)
        _check(fn(*args, _byref(h)), name)
        return Request(h.value, keep, result)

    # ---- allreduce -------------------------------------------------------
    def _allreduce_args(self, sendbuf, recvbuf, op, dtype):
        if recvbuf is None:
            b = _resolve(sendbuf, "buffer", True, dtype, self._dev)
            return _INPL, b, sendbuf, (b,)
        r = _resolve(recvbuf, "recvbuf", True, dtype, self._dev)
        if sendbuf is IN_PLACE:
            return _INPL, r, recvbuf, (r,)
        s = _resolve(sendbuf, "sendbuf", False, dtype, self._dev)
        _same(s, r, "allreduce")
        _count(r, s.count, "recvbuf")
        return s.ptr, r, recvbuf, (s, r)

    def allreduce(self, sendbuf, recvbuf=None, op=SUM, dtype=None):
        """Reduce sendbuf over the ranks into recvbuf (None: in place into
        sendbuf). Returns the output array."""
        if recvbuf is None and dtype is None and type(op) is int and 0 <= op < 8:
            # the common call (in place, a plain op), with no detour
            b = _resolve(sendbuf, "buffer", True, None, self._dev)
            st = _c_allreduce(_INPL, b.ptr, b.count, b.dtype, op, self._h)
            if st:
                raise WeftError(st, "weft_allreduce")
            return sendbuf
        sp, r, out, _ = self._allreduce_args(sendbuf, recvbuf, op, dtype)
        _check(_lib.weft_allreduce(sp, r.ptr, r.count, r.dtype, _op(op), self._h),
               "weft_allreduce")
        return out

    def iallreduce(self, sendbuf, recvbuf=None, op=SUM, dtype=None):
        sp, r, out, keep = self._allreduce_args(sendbuf, recvbuf, op, dtype)
        return self._req(_lib.weft_iallreduce, (sp, r.ptr, r.count, r.dtype, _op(op), self._h),
                         keep, out, "weft_iallreduce")

    # ---- reduce_scatter (block) ------------------------------------------
    def _rs_args(self, sendbuf, recvbuf, dtype):
        s = _resolve(sendbuf, "sendbuf", False, dtype, self._dev)
        r = _resolve(recvbuf, "recvbuf", True, dtype, self._dev)
        _same(s, r, "reduce_scatter")
        _count(s, r.count * self.size, "sendbuf")
        return s, r

    def reduce_scatter(self, sendbuf, recvbuf, op=SUM, dtype=None):
        """Reduce sendbuf (size * n elements) over the ranks; rank i gets
        block i (n elements) in recvbuf."""
        s, r = self._rs_args(sendbuf, recvbuf, dtype)
        _check(_lib.weft_reduce_scatter(s.ptr, r.ptr, r.count, r.dtype, _op(op), self._h),
               "weft_reduce_scatter")
        return recvbuf

    def ireduce_scatter(self, sendbuf, recvbuf, op=SUM, dtype=None):
        s, r = self._rs_args(sendbuf, recvbuf, dtype)
        return self._req(_lib.weft_ireduce_scatter,
                         (s.ptr, r.ptr, r.count, r.dtype, _op(op), self._h), (s, r), recvbuf,
                         "weft_ireduce_scatter")

    # ---- reduce_scatterv ----------------------------------------------------
    def _rsv_args(self, sendbuf, recvbuf, counts, op, dtype):
        p, me = self.size, self.rank
        counts = _v_list(counts, p, "counts", "reduce_scatterv")
        total = sum(counts)
        r = _resolve(recvbuf, "recvbuf", True, dtype, self._dev)
        _host_only(r, "reduce_scatterv")
        if sendbuf is IN_PLACE:  # the input is recvbuf, the whole vector
            if r.count != total:
                raise WeftError(ERR_INVALID_ARG, "reduce_scatterv: recvbuf holds %d elements, "
                                "in place it holds the whole vector, sum(counts) = %d"
                                % (r.count, total))
            sp, keep = _INPL, (r,)
        else:
            s = _resolve(sendbuf, "sendbuf", False, dtype, self._dev)
            _host_only(s, "reduce_scatterv")
            _same(s, r, "reduce_scatterv")
            if s.count != total:
                raise WeftError(ERR_INVALID_ARG, "reduce_scatterv: sendbuf holds %d elements, "
                                "sum(counts) is %d" % (s.count, total))
            if r.count != counts[me]:
                raise WeftError(ERR_INVALID_ARG, "reduce_scatterv: recvbuf holds %d elements, "
                                "counts[%d] is %d" % (r.count, me, counts[me]))
            sp, keep = s.ptr, (s, r)
        # an empty block's recvbuf may have no address (torch's empty
        # tensors: data_ptr() 0): libweft takes NULL there, as MPI does
        return (sp, r.ptr, _sizes(counts, 1), r.dtype, _op(op), self._h), keep

    def reduce_scatterv(self, sendbuf, recvbuf, counts, op=SUM, dtype=None):
        """Reduce sendbuf (sum(counts) elements) over the ranks, cut the
        result into consecutive blocks of counts[q] elements: rank q gets
        block q in recvbuf (counts[q] elements). counts: one entry per
        rank, the same on every rank (MPI_Reduce_scatter). sendbuf
        IN_PLACE: the input is recvbuf (the whole vector), and the result
        lands at its start. Every op but AVG (WeftError ERR_UNSUPPORTED:
        reduce with SUM, then divide)."""
        args, _ = self._rsv_args(sendbuf, recvbuf, counts, op, dtype)
        _check(_v_fn("weft_reduce_scatterv")(*args), "weft_reduce_scatterv")
        return recvbuf

    def ireduce_scatterv(self, sendbuf, recvbuf, counts, op=SUM, dtype=None):
        args, keep = self._rsv_args(sendbuf, recvbuf, counts, op, dtype)
        return self._req(_v_fn("weft_ireduce_scatterv"), args, keep, recvbuf,
                         "weft_ireduce_scatterv")

    # ---- allgather ---------------------------------------------------------
    def _ag_args(self, sendbuf, recvbuf, dtype):
        r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
        if r.count % self.size:
            raise WeftError(ERR_INVALID_ARG, "recvbuf holds %d elements, not a multiple of "
                            "the %d ranks" % (r.count, self.size))
        if sendbuf is IN_PLACE:
            return _INPL, r, (r,)
        s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
        _same(s, r, "allgather")
        _count(r, s.count * self.size, "recvbuf")
        return s.ptr, r, (s, r)

    def allgather(self, sendbuf, recvbuf, dtype=None):
        """recvbuf (size * n elements) gets every rank's sendbuf (n) in rank
        order. sendbuf IN_PLACE: this rank's block is already in recvbuf."""
        sp, r, _ = self._ag_args(sendbuf, recvbuf, dtype)
        _check(_lib.weft_allgather(sp, r.ptr, r.count // self.size, r.dtype, self._h),
               "weft_allgather")
        return recvbuf

    def iallgather(self, sendbuf, recvbuf, dtype=None):
        sp, r, keep = self._ag_args(sendbuf, recvbuf, dtype)
        return self._req(_lib.weft_iallgather, (sp, r.ptr, r.count // self.size, r.dtype,
                                                self._h), keep, recvbuf, "weft_iallgather")

    # ---- allgatherv ----------------------------------------------------------
    def _gathered(self, sendbuf, recvbuf, counts, displs, own, dtype, name):
        """The blocks of a gathering vector call (allgatherv, gatherv at the
        root) resolved: recvbuf holds counts[q] elements at displs[q] for every
        rank q, and sendbuf (or IN_PLACE: own's block, already in recvbuf) is
        block own. Returns (send pointer, the leading argument tuple from the
        send count to the displacements, the kept objects)."""
        counts, displs, extent = _v_blocks(counts, displs, self.size, "counts", "displs", name)
        r, scale = _resolve_moved_scaled(recvbuf, "recvbuf", True, dtype, self._dev)
        _host_only(r, name)
        _v_fits(r, scale, extent, "recvbuf", name, counts, displs)
        if sendbuf is IN_PLACE:
            sp, keep = _INPL, (r,)
        else:
            s, s_scale = _resolve_moved_scaled(sendbuf, "sendbuf", False, dtype, self._dev)
            _host_only(s, name)
            _v_same(s, s_scale, r, scale, name)
            if s.count // scale != counts[own]:
                raise WeftError(ERR_INVALID_ARG, "%s: sendbuf holds %d elements, "
                                "counts[%d] is %d" % (name, s.count // scale, own, counts[own]))
            sp, keep = s.ptr, (s, r)
        return (sp, counts[own] * scale, r.ptr, _sizes(counts, scale), _sizes(displs, scale),
                r.dtype), keep

    def _agv_args(self, sendbuf, recvbuf, counts, displs, dtype):
        args, keep = self._gathered(sendbuf, recvbuf, counts, displs, self.rank, dtype,
                                    "allgatherv")
        return args + (self._h,), keep

    def allgatherv(self, sendbuf, recvbuf, counts, displs=None, dtype=None):
        """recvbuf gets rank q's sendbuf (counts[q] elements) at displs[q]
        (elements; default: the blocks one after another, in rank order).
        counts and displs: one entry per rank, the same on every rank;
        recvbuf's elements between the blocks are left as they are.
        sendbuf IN_PLACE: this rank's block is already at displs[rank]."""
        args, _ = self._agv_args(sendbuf, recvbuf, counts, displs, dtype)
        _check(_v_fn("weft_allgatherv")(*args), "weft_allgatherv")
        return recvbuf

    def iallgatherv(self, sendbuf, recvbuf, counts, displs=None, dtype=None):
        args, keep = self._agv_args(sendbuf, recvbuf, counts, displs, dtype)
        return self._req(_v_fn("weft_iallgatherv"), args, keep, recvbuf, "weft_iallgatherv")

    # ---- bcast -------------------------------------------------------------
    def _root(self, root):
        root = int(root)
        if not 0 <= root < self.size:
            raise WeftError(ERR_INVALID_ARG, "root %d outside 0..%d" % (root, self.size - 1))
        return root

    def bcast(self, buf, root=0, dtype=None):
        """Root's buf into every rank's buf."""
        b = _resolve_moved(buf, "buffer", True, dtype, self._dev)
        _check(_lib.weft_bcast(b.ptr, b.count, b.dtype, self._root(root), self._h), "weft_bcast")
        return buf

    def ibcast(self, buf, root=0, dtype=None):
        b = _resolve_moved(buf, "buffer", True, dtype, self._dev)
        return self._req(_lib.weft_ibcast, (b.ptr, b.count, b.dtype, self._root(root), self._h),
                         (b,), buf, "weft_ibcast")

    # ---- reduce ------------------------------------------------------------
    def _reduce_args(self, sendbuf, recvbuf, root, dtype):
        root = self._root(root)
        if self.rank == root:
            if recvbuf is None:
                raise WeftError(ERR_INVALID_ARG, "reduce: recvbuf is needed at the root")
            r = _resolve(recvbuf, "recvbuf", True, dtype, self._dev)
            if sendbuf is IN_PLACE:
                return _INPL, r, root, (r,)
            s = _resolve(sendbuf, "sendbuf", False, dtype, self._dev)
            _same(s, r, "reduce")
            _count(r, s.count, "recvbuf")
            return s.ptr, r, root, (s, r)
        s = _resolve(sendbuf, "sendbuf", False, dtype, self._dev)
        return s.ptr, s, root, (s,)

    def reduce(self, sendbuf, recvbuf=None, op=SUM, root=0, dtype=None):
        """Reduce sendbuf over the ranks into the root's recvbuf (ignored
        elsewhere). At the root, sendbuf IN_PLACE reduces into recvbuf."""
        sp, r, root, _ = self._reduce_args(sendbuf, recvbuf, root, dtype)
        rp = r.ptr if self.rank == root else None
        _check(_lib.weft_reduce(sp, rp, r.count, r.dtype, _op(op), root, self._h), "weft_reduce")
        return recvbuf

    def ireduce(self, sendbuf, recvbuf=None, op=SUM, root=0, dtype=None):
        sp, r, root, keep = self._reduce_args(sendbuf, recvbuf, root, dtype)
        rp = r.ptr if self.rank == root else None
        return self._req(_lib.weft_ireduce, (sp, rp, r.count, r.dtype, _op(op), root, self._h),
                         keep, recvbuf, "weft_ireduce")

    # ---- alltoall ----------------------------------------------------------
    def _a2a_args(self, sendbuf, recvbuf, dtype):
        s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
        r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
        _same(s, r, "alltoall")
        _count(r, s.count, "recvbuf")
        if s.count % self.size:
            raise WeftError(ERR_INVALID_ARG, "sendbuf holds %d elements, not a multiple of "
                            "the %d ranks" % (s.count, self.size))
        return s, r

    def alltoall(self, sendbuf, recvbuf, dtype=None):
        """Block j of sendbuf (size equal blocks) goes to rank j; block i of
        recvbuf comes from rank i."""
        s, r = self._a2a_args(sendbuf, recvbuf, dtype)
        _check(_lib.weft_alltoall(s.ptr, r.ptr, s.count // self.size, s.dtype, self._h),
               "weft_alltoall")
        return recvbuf

    def ialltoall(self, sendbuf, recvbuf, dtype=None):
        s, r = self._a2a_args(sendbuf, recvbuf, dtype)
        return self._req(_lib.weft_ialltoall, (s.ptr, r.ptr, s.count // self.size, s.dtype,
                                               self._h), (s, r), recvbuf, "weft_ialltoall")

    # ---- alltoallv ----------------------------------------------------------
    def _a2av_args(self, sendbuf, send_counts, recvbuf, recv_counts, send_displs, recv_displs,
                   dtype):
        p, me = self.size, self.rank
        rc, rd, rext = _v_blocks(recv_counts, recv_displs, p, "recv_counts", "recv_displs",
                                 "alltoallv")
        r, scale = _resolve_moved_scaled(recvbuf, "recvbuf", True, dtype, self._dev)
        _host_only(r, "alltoallv")
        _v_fits(r, scale, rext, "recvbuf", "alltoallv", rc, rd)
        if sendbuf is IN_PLACE:  # the blocks sent are recvbuf's: send_counts/displs ignored
            sp, sc, sd, keep = _INPL, None, None, (r,)
        else:
            sc, sd, sext = _v_blocks(send_counts, send_displs, p, "send_counts", "send_displs",
                                     "alltoallv")
            s, s_scale = _resolve_moved_scaled(sendbuf, "sendbuf", False, dtype, self._dev)
            _host_only(s, "alltoallv")
            _v_same(s, s_scale, r, scale, "alltoallv")
            have = s.count // scale
            if have < sext:
                raise WeftError(ERR_INVALID_ARG, "alltoallv: sendbuf holds %d elements, its "
                                "blocks need %d" % (have, sext))
            if sc[me] != rc[me]:
                raise WeftError(ERR_INVALID_ARG, "alltoallv: send_counts[%d] is %d, "
                                "recv_counts[%d] %d (this rank's block to itself)"
                                % (me, sc[me], me, rc[me]))
            sp, sc, sd, keep = s.ptr, _sizes(sc, scale), _sizes(sd, scale), (s, r)
        return (sp, sc, sd, r.ptr, _sizes(rc, scale), _sizes(rd, scale), r.dtype,
                self._h), keep

    def alltoallv(self, sendbuf, send_counts, recvbuf, recv_counts, send_displs=None,
                  recv_displs=None, dtype=None):
        """send_counts[q] elements of sendbuf at send_displs[q] go to rank q;
        recv_counts[q] elements from rank q land at recv_displs[q] of
        recvbuf (elements; displacements default to the blocks one after
        another, in rank order). Every rank's recv_counts[q] must be what
        rank q sends it. recvbuf's elements between the blocks are left as
        they are. sendbuf IN_PLACE: the blocks sent are recvbuf's, by
        recv_counts and recv_displs (send_counts, send_displs ignored)."""
        args, _ = self._a2av_args(sendbuf, send_counts, recvbuf, recv_counts, send_displs,
                                  recv_displs, dtype)
        _check(_v_fn("weft_alltoallv")(*args), "weft_alltoallv")
        return recvbuf

    def ialltoallv(self, sendbuf, send_counts, recvbuf, recv_counts, send_displs=None,
                   recv_displs=None, dtype=None):
        args, keep = self._a2av_args(sendbuf, send_counts, recvbuf, recv_counts, send_displs,
                                     recv_displs, dtype)
        return self._req(_v_fn("weft_ialltoallv"), args, keep, recvbuf, "weft_ialltoallv")

    # ---- gather / scatter --------------------------------------------------
    def _gather_args(self, sendbuf, recvbuf, root, dtype):
        root = self._root(root)
        if self.rank == root:
            if recvbuf is None:
                raise WeftError(ERR_INVALID_ARG, "gather: recvbuf is needed at the root")
            r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
            if r.count % self.size:
                raise WeftError(ERR_INVALID_ARG, "recvbuf holds %d elements, not a multiple "
                                "of the %d ranks" % (r.count, self.size))
            n = r.count // self.size
            if sendbuf is IN_PLACE:
                return _INPL, r.ptr, n, r.dtype, root, (r,)
            s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
            _same(s, r, "gather")
            _count(s, n, "sendbuf")
            return s.ptr, r.ptr, n, s.dtype, root, (s, r)
        s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
        return s.ptr, None, s.count, s.dtype, root, (s,)

    def gather(self, sendbuf, recvbuf=None, root=0, dtype=None):
        """The root's recvbuf (size * n) gets every rank's sendbuf (n)."""
        a = self._gather_args(sendbuf, recvbuf, root, dtype)
        _check(_lib.weft_gather(*a[:5], self._h), "weft_gather")
        return recvbuf

    def igather(self, sendbuf, recvbuf=None, root=0, dtype=None):
        a = self._gather_args(sendbuf, recvbuf, root, dtype)
        return self._req(_lib.weft_igather, a[:5] + (self._h,), a[5], recvbuf, "weft_igather")

    def _scatter_args(self, sendbuf, recvbuf, root, dtype):
        root = self._root(root)
        if self.rank == root:
            s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
            if s.count % self.size:
                raise WeftError(ERR_INVALID_ARG, "sendbuf holds %d elements, not a multiple "
                                "of the %d ranks" % (s.count, self.size))
            n = s.count // self.size
            if recvbuf is IN_PLACE:
                return s.ptr, _INPL, n, s.dtype, root, (s,)
            r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
            _same(s, r, "scatter")
            _count(r, n, "recvbuf")
            return s.ptr, r.ptr, n, s.dtype, root, (s, r)
        r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
        return None, r.ptr, r.count, r.dtype, root, (r,)

    def scatter(self, sendbuf, recvbuf, root=0, dtype=None):
        """Block i of the root's sendbuf (size * n) into rank i's recvbuf (n)."""
        a = self._scatter_args(sendbuf, recvbuf, root, dtype)
        _check(_lib.weft_scatter(*a[:5], self._h), "weft_scatter")
        return recvbuf

    def iscatter(self, sendbuf, recvbuf, root=0, dtype=None):
        a = self._scatter_args(sendbuf, recvbuf, root, dtype)
        return self._req(_lib.weft_iscatter, a[:5] + (self._h,), a[5], recvbuf, "weft_iscatter")

    # ---- gatherv / scatterv -------------------------------------------------
    # The root's side (gatherv: recvbuf, counts, displs; scatterv: sendbuf,
    # counts, displs) is looked at by the root alone, as libweft and MPI read
    # it there only: other ranks pass NULL for it. Every rank checks its own
    # block; the root alone checks the lists, so an error only the root can
    # see raises there only (as MPI's erroneous arguments).
    def _gv_args(self, sendbuf, recvbuf, counts, displs, root, dtype):
        root = self._root(root)
        if self.rank != root:
            if sendbuf is IN_PLACE:
                raise WeftError(ERR_INVALID_ARG, "gatherv: IN_PLACE is for the root only "
                                "(rank %d, root %d)" % (self.rank, root))
            s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
            _host_only(s, "gatherv")
            return (s.ptr, s.count, None, None, None, s.dtype, root, self._h), (s,)
        if recvbuf is None:
            raise WeftError(ERR_INVALID_ARG, "gatherv: recvbuf is needed at the root")
        # in place: the root's block is already at displs[root]
        args, keep = self._gathered(sendbuf, recvbuf, counts, displs, root, dtype, "gatherv")
        return args + (root, self._h), keep

    def gatherv(self, sendbuf, recvbuf=None, counts=None, displs=None, root=0, dtype=None):
        """The root's recvbuf gets rank q's sendbuf (counts[q] elements) at
        displs[q] (elements; default: the blocks one after another, in rank
        order); recvbuf's elements between the blocks are left as they are.
        Arguments in gather's order, with allgatherv's counts and displs
        after the recvbuf they describe: recvbuf, counts and displs are the
        root's, looked at there only (other ranks: gatherv(sendbuf,
        root=root); what they pass is ignored). At the root, sendbuf
        IN_PLACE: its block is already at displs[root]. As in MPI, the root
        alone checks the lists (and its sendbuf against counts[root]); the
        other ranks check their sendbuf only: that it holds the root's
        counts[rank] elements is the caller's to ensure."""
        args, _ = self._gv_args(sendbuf, recvbuf, counts, displs, root, dtype)
        _check(_v_fn("weft_gatherv")(*args), "weft_gatherv")
        return recvbuf

    def igatherv(self, sendbuf, recvbuf=None, counts=None, displs=None, root=0, dtype=None):
        args, keep = self._gv_args(sendbuf, recvbuf, counts, displs, root, dtype)
        return self._req(_v_fn("weft_igatherv"), args, keep, recvbuf, "weft_igatherv")

    def _sv_args(self, sendbuf, counts, recvbuf, displs, root, dtype):
        root = self._root(root)
        if self.rank != root:
            if recvbuf is IN_PLACE:
                raise WeftError(ERR_INVALID_ARG, "scatterv: IN_PLACE is for the root only "
                                "(rank %d, root %d)" % (self.rank, root))
            r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
            _host_only(r, "scatterv")
            return (None, None, None, r.ptr, r.count, r.dtype, root, self._h), (r,)
        counts, displs, extent = _v_blocks(counts, displs, self.size, "counts", "displs",
                                           "scatterv")
        s, scale = _resolve_moved_scaled(sendbuf, "sendbuf", False, dtype, self._dev)
        _host_only(s, "scatterv")
        if s.count // scale < extent:
            raise WeftError(ERR_INVALID_ARG, "scatterv: sendbuf holds %d elements, its blocks "
                            "need %d" % (s.count // scale, extent))
        if recvbuf is IN_PLACE:  # the root's block stays in sendbuf
            rp, keep = _INPL, (s,)
        else:
            r, r_scale = _resolve_moved_scaled(recvbuf, "recvbuf", True, dtype, self._dev)
            _host_only(r, "scatterv")
            _v_same(s, scale, r, r_scale, "scatterv")
            if r.count // scale != counts[root]:
                raise WeftError(ERR_INVALID_ARG, "scatterv: recvbuf holds %d elements, "
                                "counts[%d] is %d" % (r.count // scale, root, counts[root]))
            rp, keep = r.ptr, (s, r)
        return (s.ptr, _sizes(counts, scale), _sizes(displs, scale), rp, counts[root] * scale,
                s.dtype, root, self._h), keep

    def scatterv(self, sendbuf, counts, recvbuf, displs=None, root=0, dtype=None):
        """Rank q's recvbuf gets counts[q] elements from displs[q] of the
        root's sendbuf (elements; default: the blocks one after another, in
        rank order). Arguments in scatter's order, with the counts after the
        sendbuf they describe (as alltoallv's send_counts) and displs
        optional after recvbuf: sendbuf, counts and displs are the root's,
        looked at there only (other ranks: scatterv(None, None, recvbuf,
        root=root); what they pass is ignored). At the root, recvbuf
        IN_PLACE: its block stays in sendbuf. As in MPI, the root alone
        checks the lists (and its recvbuf against counts[root]); the other
        ranks check their recvbuf only: that it holds the root's
        counts[rank] elements is the caller's to ensure."""
        args, _ = self._sv_args(sendbuf, counts, recvbuf, displs, root, dtype)
        _check(_v_fn("weft_scatterv")(*args), "weft_scatterv")
        return recvbuf

    def iscatterv(self, sendbuf, counts, recvbuf, displs=None, root=0, dtype=None):
        args, keep = self._sv_args(sendbuf, counts, recvbuf, displs, root, dtype)
        return self._req(_v_fn("weft_iscatterv"), args, keep, recvbuf, "weft_iscatterv")

    # ---- barrier -------------------------------------------------------------
    def barrier(self):
        _check(_lib.weft_barrier(self._h), "weft_barrier")

    def ibarrier(self):
        return self._req(_lib.weft_ibarrier, (self._h,), None, None, "weft_ibarrier")

    # ---- point to point ------------------------------------------------------
    def _peer(self, peer, what):
        peer = int(peer)
        if not 0 <= peer < self.size:
            raise WeftError(ERR_INVALID_ARG, "%s %d outside 0..%d" % (what, peer, self.size - 1))
        return peer

    def send(self, buf, dest, tag=0, dtype=None):
        b = _resolve_moved(buf, "buffer", False, dtype, self._dev)
        _check(_lib.weft_send(b.ptr, b.count, b.dtype, self._peer(dest, "dest"), int(tag),
                              self._h), "weft_send")

    def isend(self, buf, dest, tag=0, dtype=None):
        b = _resolve_moved(buf, "buffer", False, dtype, self._dev)
        return self._req(_lib.weft_isend, (b.ptr, b.count, b.dtype, self._peer(dest, "dest"),
                                           int(tag), self._h), (b,), None, "weft_isend")

    def recv(self, buf, source, tag=0, dtype=None):
        b = _resolve_moved(buf, "buffer", True, dtype, self._dev)
        _check(_lib.weft_recv(b.ptr, b.count, b.dtype, self._peer(source, "source"), int(tag),
                              self._h), "weft_recv")
        return buf

    def irecv(self, buf, source, tag=0, dtype=None):
        b = _resolve_moved(buf, "buffer", True, dtype, self._dev)
        return self._req(_lib.weft_irecv, (b.ptr, b.count, b.dtype,
                                           self._peer(source, "source"), int(tag), self._h),
                         (b,), buf, "weft_irecv")

    def sendrecv(self, sendbuf, dest, recvbuf, source, sendtag=0, recvtag=0, dtype=None):
        """Send sendbuf to dest and receive recvbuf from source at once."""
        s = _resolve_moved(sendbuf, "sendbuf", False, dtype, self._dev)
        r = _resolve_moved(recvbuf, "recvbuf", True, dtype, self._dev)
        _same(s, r, "sendrecv")
        _check(_lib.weft_sendrecv(s.ptr, s.count, self._peer(dest, "dest"), int(sendtag),
                                  r.ptr, r.count, self._peer(source, "source"), int(recvtag),
                                  s.dtype, self._h), "weft_sendrecv")
        return recvbuf


def datatype_of(array):
    """The Weft datatype Weft would use for array (an int; see weft.FLOAT32 ...)."""
    return _resolve(array, "array", False, None, True).dtype


def datatype_name(dtype):
    return _dtypes.name(dtype)


__all__ = ["init", "init_with_store", "finalize", "initialized", "version", "library_path",
           "Comm", "Request", "waitall", "WeftError", "IN_PLACE", "UNDEFINED", "datatype_of",
           "datatype_name",
           "INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "BFLOAT16",
           "FLOAT32", "FLOAT64", "SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR",
           "COMPLETION_MODE"]
