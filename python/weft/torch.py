"""weft.torch: a torch.distributed backend named "weft", and a DDP comm hook.

    import torch.distributed as dist
    import weft.torch                      # registers the backend
    dist.init_process_group("weft")        # under: mpiexec -n N python train.py
    model = torch.nn.parallel.DistributedDataParallel(model)   # or torchrun

Launching: by an MPI launcher (mpiexec, srun) or by torchrun. Weft's world
is MPI's. Under an MPI launcher, when RANK/WORLD_SIZE are not in the
environment (mpiexec does not set them), importing this module initialises
Weft and sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
(a free port chosen by rank 0 and broadcast by Weft), so that the unmodified
`init_process_group("weft")` and any gloo group beside it find their store.
Under torchrun (or any launcher that sets RANK and WORLD_SIZE without
MPI's process manager, or with rank and world_size given to
init_process_group), creating the default group initialises Weft through
torch's store: weft.init_with_store, where rank 0 serves MPI's startup.

What the backend serves: allreduce (sum, avg, min, max, product, band,
bor, bxor; bool tensors too, SUM as any and PRODUCT as all), broadcast, reduce, allgather (list and into-tensor),
reduce_scatter (list and tensor; sizes that differ by rank by
reduce_scatterv), alltoall (list and single, even and uneven splits),
gather, scatter, barrier, send, recv (and batch_isend_irecv),
allreduce_coalesced, and the coalesced into-tensor allgather and
reduce_scatter that torch's functional collectives call (DTensor, FSDP2).
Groups: the world and new_group(ranks) over any ranks, each group on a Weft
communicator of its own that its members alone create.

CPU tensors, and CUDA tensors. allreduce, broadcast, allgather,
reduce_scatter and even alltoall of CUDA tensors run on a Weft communicator
bound to the tensor's current CUDA stream (NCCL for large ones but alltoall,
host transfer otherwise): they are ordered on that stream, and the calling thread
does not wait. reduce, gather, scatter, uneven alltoall and reduce_scatter, send and recv (and
every collective where this libweft has no usable CUDA) take CUDA tensors
through host copies: the calling thread waits for the copy to the host, and
the results are copied back when the Work is waited for.

A collective torch will wait on at once (opts.asyncOp False: the blocking
dist.all_reduce, broadcast, barrier, all_gather_into_tensor,
reduce_scatter_tensor, all_reduce_coalesced) is Weft's blocking call on the
calling thread and returns a completed Work. Every other one is issued
nonblocking; it returns a Work whose future is completed by Weft's
completion callback (see weft._request), so DDP chains its bucket work on it
while backward goes on. Work.wait() waits in Weft (GIL released) without
going through the future.

allreduce_hook is a DDP comm hook that allreduces buckets through Weft in a
job whose default backend is another one (gloo).
"""

import os
import socket
import struct
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import Backend as _C10dBackend, Work as _C10dWork

import weft
from weft import WeftError
from weft._request import _dispatcher as _completions
from weft._bootstrap import mpi_launcher_key
from weft._errors import ERR_UNSUPPORTED, ERR_INVALID_ARG, ERR_OP, ERR_DATATYPE, ERR_TIMEOUT

BACKEND_NAME = "weft"

# keyed by the value of ReduceOp.RedOpType (opts.reduceOp.op.value: hashing
# the pybind enum itself costs a microsecond more)
_RED_OPS = {
    dist.ReduceOp.SUM.value: weft.SUM, dist.ReduceOp.AVG.value: weft.AVG,
    dist.ReduceOp.PRODUCT.value: weft.PROD, dist.ReduceOp.MIN.value: weft.MIN,
    dist.ReduceOp.MAX.value: weft.MAX, dist.ReduceOp.BAND.value: weft.BAND,
    dist.ReduceOp.BOR.value: weft.BOR, dist.ReduceOp.BXOR.value: weft.BXOR,
}
_world = None  # the Weft world communicator shared by this module
# the vector collectives (allgatherv, alltoallv); an older libweft lacks them,
# and the uneven paths then exchange point to point (broadcasts, _pairwise)
_HAS_V = weft._lib.has("weft_iallgatherv") and weft._lib.has("weft_ialltoallv")
# reduce_scatterv (MPI_Reduce_scatter), newer still: without it the uneven
# reduce_scatter runs one reduce per rank
_HAS_RSV = weft._lib.has("weft_ireduce_scatterv")


def world_comm():
    """The Weft communicator over every process, created at first use
    (collective: every rank's first call must come in the same order)."""
    global _world
    if _world is None:
        weft.init()
        _world = weft.Comm.world()
    return _world


def _world_for(dist_opts, ranks):
    """The Weft world for torch's group: made through the group's store when
    this is the default group (torch makes it first; ranks: the group's
    global ranks, [] when torch does not say) of a job that no MPI launcher
    started (torchrun, or ranks given to init_process_group by hand)."""
    global _world
    size = dist_opts.group_size
    if _world is None and not weft.initialized() and mpi_launcher_key() is None and size > 1 \
            and ranks in ([], list(range(size))):
        timeout = getattr(dist_opts, "timeout", None)
        # a key per torchrun attempt: an elastic restart may keep the store
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        _world = weft.init_with_store(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                                      timeout.total_seconds() if timeout else 300.0,
                                      key="weft/bootstrap/attempt" + attempt)
    return world_comm()


def setup_env():
    """Set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT from Weft's
    world (those already set are kept). Collective over every process."""
    comm = world_comm()
    host = socket.gethostname()
    port = 0
    if comm.rank == 0:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("", 0))
        port = s.getsockname()[1]
        s.close()
    msg = bytearray(struct.pack("=i256s", port, host.encode()[:255]))
    comm.bcast(msg, root=0)
    port, root_host = struct.unpack("=i256s", bytes(msg))
    root_host = root_host.rstrip(b"\0").decode()
    local = os.environ.get("MPI_LOCALRANKID", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    env = {"RANK": str(comm.rank), "WORLD_SIZE": str(comm.size), "LOCAL_RANK": local,
           "MASTER_ADDR": "127.0.0.1" if root_host == host else root_host,
           "MASTER_PORT": str(port)}
    for k, v in env.items():
        os.environ.setdefault(k, v)


def _op(opts_op):
    try:
        return _RED_OPS[opts_op.op.value]
    except (KeyError, TypeError, AttributeError):
        raise WeftError(ERR_OP, "reduce op %s is not served by the weft backend" % (opts_op,)) \
            from None


# ---- the lifetime of the Works handed to torch --------------------------------
# A _Work is a Python subclass of c10d's Work. torch's C++ side may keep one
# after Python has dropped it (DDP keeps the forward pass's Work of a Join
# context and calls its wait() and result() in backward), and a Python
# subclass's object must outlive every C++ call into it: freed, the C++ call
# lands in freed memory (measured: heap corruption under Join). So each Work
# handed to torch is pinned here until its last C++ call has had its chance:
# after wait() returned (dropped once later collectives are issued, the last
# four kept, so that a result() right after the wait still finds it), or once it completed with
# its future taken (DDP's buckets: C++ keeps only the future). A Work nobody
# waits for nor asks a future of (an isend never waited) is dropped once it
# completed and _PIN_BOUND newer ones are pinned. Any thread; the dict and
# list operations are atomic under the GIL.
_PIN_BOUND = 64
_pins = {}         # id -> _Work, in issue order
_unpin_next = []   # waited Works: the last four stay, older ones go at the next issue


def _pin(work):
    if len(_unpin_next) > 4:  # the last few stay: another thread may be between wait and result
        del _unpin_next[:-4]
    _pins[id(work)] = work
    if len(_pins) > _PIN_BOUND:  # look at a few of the oldest (in flight ones stay)
        for k in list(_pins)[:min(4, len(_pins) - _PIN_BOUND)]:
            w = _pins.get(k)
            if w is not None and all(_done_now(r) for r in w._reqs):
                _pins.pop(k, None)
    return work


def _unpin(work):
    if _pins.pop(id(work), None) is not None:
        _unpin_next.append(work)


class _Work(_C10dWork):
    """Collectives in flight (Weft requests). wait() waits in Weft (GIL
    released). get_future() returns a torch Future completed by Weft's
    completion callback once every request is done and `after` (a copy-out)
    has run; the callback is registered at the first get_future(), so a
    blocking collective (which only waits) costs no callback at all."""

    def __init__(self, reqs, result, after=None):
        super().__init__()
        self._reqs = reqs
        self._result = result
        self._after = after
        self._fut = None
        self._err = None
        self._left = 0
        # guards the copy-out and the count; only Works with either need it
        self._lock = threading.Lock() if after is not None else None

    def _run_after(self):
        # The copy-out runs once; a second caller returns only after it ran.
        with self._lock:
            after, self._after = self._after, None
            if after is not None:
                after()

    def wait(self, timeout=None):
        limit = _seconds(timeout)
        if limit:
            # A bounded wait polls (weft_test drives progress too), sleeping
            # 50 us doubling to 1 ms between tests, and raises at the limit;
            # the collective stays in flight (Weft's watchdog, WEFT_TIMEOUT,
            # fails it if it never completes).
            deadline = time.monotonic() + limit
            pause = 50e-6
            for r in self._reqs:
                while not r.test():
                    if time.monotonic() >= deadline:
                        raise WeftError(ERR_TIMEOUT, "weft backend: the collective did not "
                                        "complete within %g s (it is still in flight)" % limit)
                    time.sleep(pause)
                    pause = min(2 * pause, 1e-3)
        try:
            for r in self._reqs:
                r.wait()
            if self._after is not None:
                self._run_after()
        finally:
            _unpin(self)
        return True

    def get_future(self):
        if self._fut is None:
            if self._lock is None:
                self._lock = threading.Lock()
            self._fut = torch.futures.Future()
            # Taken inside a future's callback, on a completion thread, the
            # future may be waited for right there (PowerSGD's hook does):
            # another thread must then complete it.
            _completions.spare()
            # Requests already done (test() never blocks) complete the future
            # here, without a trip through the completion thread.
            live = [r for r in self._reqs if r._status is None and not _done_now(r)]
            self._left = len(live) + 1
            for r in live:
                r.add_done_callback(self._on_done)
            self._on_done(0)  # the registration itself: nothing left to add
        return self._fut

    def _on_done(self, status):
        # On the completion thread (or the engine thread), and once on the
        # thread that registered: the count is taken under the lock.
        with self._lock:
            if status != 0 and self._err is None:
                self._err = WeftError(status, "weft backend collective")
            self._left -= 1
            if self._left:
                return
        if self._err is None:
            for r in self._reqs:
                if r._status is not None and r._status != 0:
                    self._err = WeftError(r._status, "weft backend collective")
        if self._err is None:
            try:
                self._run_after()
            except Exception as e:  # noqa: BLE001 - reported through the future
                self._err = e
        if self._err is not None:
            self._fut.set_exception(self._err)
        else:
            self._fut.set_result(self._result)
        _unpin(self)  # C++ keeps the future, not this Work

    def is_completed(self):
        if self._fut is not None:
            return self._fut.done()
        return all(r.test() for r in self._reqs)

    def is_success(self):
        return self.is_completed() and self.exception() is None

    def exception(self):
        if self._fut is not None and self._fut.done():
            try:
                self._fut.value()
            except Exception as e:  # the future's exception
                return e
        return None

    def result(self):
        return self._result

    def synchronize(self):
        self.wait()


def _seconds(timeout):
    """Work.wait's timeout in seconds, or None for none: torch passes a
    timedelta (zero: no limit, its kNoTimeout); a number is taken as seconds."""
    if timeout is None:
        return None
    s = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    return s if s > 0 else None


def _done_now(req):
    try:
        return req.test()
    except WeftError:
        return True  # failed: its status is on the request, _on_done reports it


def _done_work(result):
    return _Work([], result)


def _sync(opts):
    """True when torch waits on the Work at once: dist.all_reduce(...,
    async_op=False) and its kin set opts.asyncOp False (C++ callers such as
    DDP keep the default, True). Such a call is served by Weft's blocking
    call, which starts the operation on the calling thread and drives it
    there without waking Weft's engine thread (an issue of a nonblocking one
    wakes it, and on a fully used machine the woken engine and the waiter
    share the cores: doc/python.md, "What limits it")."""
    return opts is not None and not getattr(opts, "asyncOp", True)  # (older torch: no field)


def _check_slots(what, slots, n, me, own):
    """A per-rank list of tensors (gather's outputs, scatter's inputs, ...):
    n of them, this rank's as large as `own`, the rank's own tensor on the
    other side; WeftError WEFT_ERR_INVALID_ARG otherwise."""
    if len(slots) != n:
        raise WeftError(ERR_INVALID_ARG, "%s: %d tensors in the list for %d ranks"
                        % (what, len(slots), n))
    if slots[me].numel() != own.numel():
        raise WeftError(ERR_INVALID_ARG, "%s: this rank's tensor in the list has %d elements, "
                        "its own tensor %d" % (what, slots[me].numel(), own.numel()))


def _work(reqs, result, after=None):
    return _Work(reqs, result, after)


def _host_copy(x):
    """x (a tensor, or lists of them, or anything else) with each CUDA tensor
    replaced by a host copy (.cpu() waits for the current stream's work)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu() if x.is_cuda else x
    if isinstance(x, list):
        return [_host_copy(y) for y in x]
    return x


def _copy_back(dst, src):
    """Copy each host tensor of src into the tensor at the same place in dst
    (on the current stream) where they differ."""
    if isinstance(dst, torch.Tensor):
        if dst is not src:
            dst.copy_(src)
    elif isinstance(dst, list):
        for d, t in zip(dst, src):
            _copy_back(d, t)


def _backend_base():
    """The class a Python backend derives from. torch binds a constructor on
    c10d's Backend for Python subclasses only in its newer releases (2.11
    has none: "No constructor defined!"); before that, torch takes a Python
    backend as a ProcessGroup subclass (its creator may return one, and it
    calls the same collective methods on it). WEFT_PY_TORCH_BASE=ProcessGroup
    takes that way on any torch (the tests run it on the newer one)."""
    if os.environ.get("WEFT_PY_TORCH_BASE") == "ProcessGroup":  # the older torch's way, forced
        return dist.ProcessGroup

    class _Probe(_C10dBackend):
        pass
    try:
        _Probe(0, 1)
    except TypeError:
        return dist.ProcessGroup
    return _C10dBackend


_BASE = _backend_base()


class WeftBackend(_BASE):
    """The torch.distributed backend over a Weft communicator."""

    def __init__(self, rank, size, comm):
        super().__init__(rank, size)
        self._comm = comm
        self._cuda_comms = {}  # CUDA stream pointer -> Weft communicator bound to it

    # Weft issues each operation as it comes (no NCCL-style coalescing
    # window). Said here as a plain attribute: c10d's own property of that
    # name asks the C++ side, which asks the Python object again, without
    # end (batch_isend_irecv reads it first).
    supports_coalescing = False

    if _BASE is dist.ProcessGroup:
        # As a ProcessGroup (older torch), torch keeps the group's name in the
        # backends registered on it, and this one has none: group_name would
        # raise "ProcessGroup name not set" (DeviceMesh, functional
        # collectives and DTensor read it). Kept here instead.
        def _set_group_name(self, name):
            self._weft_group_name = name

        @property
        def group_name(self):
            return getattr(self, "_weft_group_name", "")

        def _get_backend(self, device):
            # the group is its own backend (batch_isend_irecv asks for it)
            return self

    def shutdown(self):
        """torch's destroy_process_group: free this group's Weft communicators
        (collective over the group's ranks, which all destroy it, in one
        order). Operations still in flight on them are waited for first.
        Idempotent."""
        comms = [self._comm] + list(self._cuda_comms.values())
        self._cuda_comms = {}
        for c in comms:
            if c is not None and c is not _world:
                c.free()

    def getBackendName(self):
        return BACKEND_NAME

    def name(self):
        return BACKEND_NAME

    @property
    def comm(self):
        """The Weft communicator of this group (host memory)."""
        return self._comm

    # ---- where a tensor goes ---------------------------------------------
    def _comm_for(self, tensors):
        """(communicator, on CUDA): the host communicator for CPU tensors; for
        CUDA tensors the one bound to their current stream, or None where
        this libweft has no usable CUDA (the caller then takes _via_host)."""
        if len(tensors) == 1 and tensors[0].is_cpu:  # the common case, cheaply
            return self._comm, False
        dev = tensors[0].device.type
        for t in tensors:
            if t.device.type != dev:
                raise WeftError(ERR_INVALID_ARG, "tensors on %s and %s in one call" %
                                (dev, t.device.type))
        if dev == "cpu":
            return self._comm, False
        if dev == "cuda":
            return self._cuda_comm(tensors[0]), True
        raise WeftError(ERR_UNSUPPORTED, "the weft backend takes cpu and cuda tensors, not %s"
                        % dev)

    def _cuda_comm(self, t):
        from weft import _lib
        if not _lib.weft_cuda_available():
            return None  # this libweft has no usable CUDA: host copies (_via_host)
        stream = torch.cuda.current_stream(t.device)
        key = stream.cuda_stream
        c = self._cuda_comms.get(key)
        if c is None:
            # Collective: every rank issues its first CUDA collective on a
            # stream in the same order, as NCCL requires too.
            import ctypes
            ws = ctypes.c_void_p()
            weft._check(_lib.weft_stream_wrap_cuda(key, ctypes.byref(ws)), "weft_stream_wrap_cuda")
            c = weft.Comm.world(stream=ws.value)
            c._dev = True
            self._cuda_comms[key] = c
        return c

    def _via_host(self, method, *args, outputs=True):
        """A collective on CUDA tensors that Weft does not serve on the stream
        (reduce, gather, scatter, uneven alltoall, send, recv; every one where
        this libweft has no usable CUDA) goes through host copies: the CUDA
        tensors are copied to the host (.cpu() waits for the current
        stream's work on them), `method` is issued on the copies, and the
        Work returned copies args[0] (the outputs, unless outputs is False)
        back when it is waited for or its future completes. The collective
        itself does not block the caller: a CUDA irecv before the matching
        isend must not deadlock."""
        host = [_host_copy(a) for a in args]
        impl = getattr(getattr(method, "__func__", None), "__wrapped__", None)  # not pinned
        inner = impl(self, *host) if impl is not None else method(*host)

        def after():
            if inner._after is not None:
                inner._run_after()
            if outputs:
                _copy_back(args[0], host[0])
        res = args[0]
        return _Work(inner._reqs, res if isinstance(res, list) else [res], after)

    def _cuda_done(self, result):
        # A stream-bound collective is ordered on the tensor's current stream,
        # where later work waits for it (as NCCL's): the Work is complete for
        # the host as soon as it is enqueued.
        return _done_work(result)

    # ---- collectives ---------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        op = _op(opts.reduceOp) if opts is not None else weft.SUM
        comm, dev = self._comm_for(tensors)
        if dev:
            if comm is None:
                return self._via_host(self.allreduce, tensors, opts)
            for t in tensors:
                comm.allreduce(t, op=op)
            return self._cuda_done(tensors)
        if _sync(opts):
            for t in tensors:
                comm.allreduce(t, None, op)
            return _done_work(tensors)
        if len(tensors) == 1:
            return _Work([comm.iallreduce(tensors[0], None, op)], tensors)
        return _work([comm.iallreduce(t, op=op) for t in tensors], tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        op = _op(opts.reduceOp) if opts is not None else weft.SUM
        if len({t.dtype for t in tensors}) > 1:
            raise WeftError(ERR_DATATYPE, "allreduce_coalesced: tensors of several dtypes")
        comm, dev = self._comm_for(tensors)
        if dev and comm is None:
            return self._via_host(self.allreduce_coalesced, tensors, opts)
        flat = torch.cat([t.reshape(-1) for t in tensors])
        if dev or _sync(opts):
            comm.allreduce(flat, op=op)
            self._unflatten(flat, tensors)
            return self._cuda_done(tensors) if dev else _done_work(tensors)
        return _work([comm.iallreduce(flat, op=op)], tensors,
                     after=lambda: self._unflatten(flat, tensors))

    @staticmethod
    def _unflatten(flat, tensors):
        off = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[off:off + n].view_as(t))
            off += n

    def broadcast(self, tensors, opts):
        root = opts.rootRank
        comm, dev = self._comm_for(tensors)
        if dev and comm is None:
            return self._via_host(self.broadcast, tensors, opts)
        if dev or _sync(opts):
            for t in tensors:
                comm.bcast(t, root=root)
            return self._cuda_done(tensors) if dev else _done_work(tensors)
        return _work([comm.ibcast(t, root=root) for t in tensors], tensors)

    def reduce(self, tensors, opts):
        op = _op(opts.reduceOp)
        root = opts.rootRank
        if tensors[0].is_cuda:
            return self._via_host(self.reduce, tensors, opts)
        comm, _ = self._comm_for(tensors)
        reqs = [comm.ireduce(weft.IN_PLACE if comm.rank == root else t,
                             t if comm.rank == root else None, op=op, root=root)
                for t in tensors]
        return _work(reqs, tensors)

    def allgather(self, output_lists, inputs, opts=None):
        # output_lists[i]: size tensors shaped like inputs[i]
        comm, dev = self._comm_for(inputs)
        if dev and comm is None:
            return self._via_host(self.allgather, output_lists, inputs, opts)
        for outs, inp in zip(output_lists, inputs):
            _check_slots("allgather", outs, comm.size, comm.rank, inp)
            if any(o.numel() != inp.numel() for o in outs):
                return self._allgather_uneven(comm, dev, output_lists, inputs)
        reqs, flats, copies = [], [], []
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty((comm.size,) + tuple(inp.shape), dtype=inp.dtype,
                               device=inp.device)
            flats.append(flat)
            copies.append((flat, outs))
            if dev:
                comm.allgather(inp.contiguous(), flat)
            else:
                reqs.append(comm.iallgather(inp.contiguous(), flat))

        def copy_out():
            for flat, outs in copies:
                for i, o in enumerate(outs):
                    o.copy_(flat[i])
        if dev:  # in stream order, after the collective
            copy_out()
            return self._cuda_done(output_lists)
        return _work(reqs, output_lists, after=copy_out)

    def _allgather_uneven(self, comm, dev, output_lists, inputs):
        """allgather of tensors whose sizes differ by rank (as torch allows).
        Host tensors: one allgatherv per input into a flat buffer, whose
        blocks are copied into the output tensors once it completes. On a
        stream-bound communicator (the v-forms take host memory only), or
        with outputs of another dtype than their input: one broadcast per
        rank, from that rank's input into every rank's tensor of its slot
        (contiguous ones in place, others through a copy)."""
        if not dev and _HAS_V and all(o.dtype == inp.dtype
                                      for outs, inp in zip(output_lists, inputs) for o in outs):
            reqs, flats = [], []
            for outs, inp in zip(output_lists, inputs):
                counts = [o.numel() for o in outs]
                flat = inp.new_empty(sum(counts))
                flats.append((flat, outs))
                reqs.append(comm.iallgatherv(inp.contiguous(), flat, counts))

            def unflatten():
                for flat, outs in flats:
                    self._unflatten(flat, outs)
            return _work(reqs, output_lists, after=unflatten)
        reqs, copies = [], []
        for outs, inp in zip(output_lists, inputs):
            for q, o in enumerate(outs):
                buf = o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                if q == comm.rank:
                    buf.view(-1).copy_(inp.reshape(-1))
                if buf is not o:
                    copies.append((o, buf))
                if dev:
                    comm.bcast(buf, root=q)
                else:
                    reqs.append(comm.ibcast(buf, root=q))

        def copy_out():
            for o, buf in copies:
                o.copy_(buf)
        if dev:
            copy_out()
            return self._cuda_done(output_lists)
        return _work(reqs, output_lists, after=copy_out if copies else None)

    def all_gather_single(self, output, inp, opts=None):
        comm, dev = self._comm_for([output, inp])
        if dev and comm is None:
            return self._via_host(self.all_gather_single, output, inp, opts)
        if dev or _sync(opts):
            comm.allgather(inp, output)
            return self._cuda_done([output]) if dev else _done_work([output])
        return _work([comm.iallgather(inp, output)], [output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """all_gather_into_tensor of each (output, input) pair, as one Work:
        torch's coalesced form (DTensor's full_tensor, FSDP)."""
        outputs, inputs = list(outputs), list(inputs)
        if len(outputs) != len(inputs):
            raise WeftError(ERR_INVALID_ARG, "all_gather coalesced: %d outputs for %d inputs"
                            % (len(outputs), len(inputs)))
        comm, dev = self._comm_for(outputs + inputs)
        if dev and comm is None:
            return self._via_host(self.all_gather_single_coalesced, outputs, inputs, opts)
        if dev or _sync(opts):
            for out, inp in zip(outputs, inputs):
                comm.allgather(inp, out)
            return self._cuda_done(outputs) if dev else _done_work(outputs)
        return _work([comm.iallgather(inp, out) for out, inp in zip(outputs, inputs)], outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced  # its name in older torch

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = _op(opts.reduceOp) if opts is not None else weft.SUM
        comm, dev = self._comm_for(outputs)
        if dev and comm is None:
            return self._via_host(self.reduce_scatter, outputs, input_lists, opts)
        for out, ins in zip(outputs, input_lists):
            _check_slots("reduce_scatter", ins, comm.size, comm.rank, out)
        if any(t.numel() != out.numel() for out, ins in zip(outputs, input_lists) for t in ins):
            # sizes that differ by rank (every rank sees them in its inputs)
            if dev:
                return self._via_host(self.reduce_scatter, outputs, input_lists, opts)
            return self._reduce_scatter_uneven(comm, op, outputs, input_lists)
        reqs, keep = [], []
        for out, ins in zip(outputs, input_lists):
            flat = torch.cat([t.reshape(-1) for t in ins])
            keep.append(flat)
            if dev:
                comm.reduce_scatter(flat, out, op=op)
            else:
                reqs.append(comm.ireduce_scatter(flat, out, op=op))
        if dev:
            return self._cuda_done(outputs)
        return _work(reqs, outputs)

    def _reduce_scatter_uneven(self, comm, op, outputs, input_lists):
        """reduce_scatter of host tensors whose sizes differ by rank: one
        reduce_scatterv per output, of the concatenation of its input list
        into the output (through a contiguous copy where the output is not
        contiguous). With AVG (which reduce_scatterv does not serve), inputs
        of another dtype than their output, or a libweft without
        reduce_scatterv: one reduce per rank, to that rank."""
        if _HAS_RSV and op != weft.AVG and all(t.dtype == out.dtype for out, ins in
                                               zip(outputs, input_lists) for t in ins):
            reqs, copies = [], []
            for out, ins in zip(outputs, input_lists):
                flat = torch.cat([t.reshape(-1) for t in ins])
                recv = out if out.is_contiguous() else \
                    torch.empty_like(out, memory_format=torch.contiguous_format)
                if recv is not out:
                    copies.append((out, recv))
                reqs.append(comm.ireduce_scatterv(flat, recv, [t.numel() for t in ins], op=op))

            def copy_out():
                for out, recv in copies:
                    out.copy_(recv)
            return _work(reqs, outputs, after=copy_out if copies else None)
        reqs = [comm.ireduce(t.contiguous(), out if q == comm.rank else None, op=op, root=q)
                for out, ins in zip(outputs, input_lists) for q, t in enumerate(ins)]
        return _work(reqs, outputs)

    def reduce_scatter_single(self, output, inp, opts=None):
        op = _op(opts.reduceOp) if opts is not None else weft.SUM
        comm, dev = self._comm_for([output, inp])
        if dev and comm is None:
            return self._via_host(self.reduce_scatter_single, output, inp, opts)
        if dev or _sync(opts):
            comm.reduce_scatter(inp, output, op=op)
            return self._cuda_done([output]) if dev else _done_work([output])
        return _work([comm.ireduce_scatter(inp, output, op=op)], [output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        """reduce_scatter_tensor of each (output, input) pair, as one Work:
        torch's coalesced form."""
        op = _op(opts.reduceOp) if opts is not None else weft.SUM
        outputs, inputs = list(outputs), list(inputs)
        if len(outputs) != len(inputs):
            raise WeftError(ERR_INVALID_ARG, "reduce_scatter coalesced: %d outputs for %d "
                            "inputs" % (len(outputs), len(inputs)))
        comm, dev = self._comm_for(outputs + inputs)
        if dev and comm is None:
            return self._via_host(self.reduce_scatter_single_coalesced, outputs, inputs, opts)
        if dev or _sync(opts):
            for out, inp in zip(outputs, inputs):
                comm.reduce_scatter(inp, out, op=op)
            return self._cuda_done(outputs) if dev else _done_work(outputs)
        return _work([comm.ireduce_scatter(inp, out, op=op) for out, inp in zip(outputs, inputs)],
                     outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced  # older torch's name

    def alltoall(self, outputs, inputs, opts=None):
        comm, dev = self._comm_for(outputs + inputs)
        shapes = {tuple(t.shape) for t in outputs + inputs}
        if dev and (comm is None or len(shapes) != 1):  # uneven: alltoallv, on the host
            return self._via_host(self.alltoall, outputs, inputs, opts)
        if len(outputs) != comm.size or len(inputs) != comm.size:
            raise WeftError(ERR_INVALID_ARG, "alltoall: %d/%d tensors for %d ranks" %
                            (len(outputs), len(inputs), comm.size))
        if len(shapes) == 1:
            send = torch.cat([t.reshape(-1) for t in inputs])
            recv = torch.empty_like(send)

            def copy_out():
                self._unflatten(recv, outputs)
            if dev:  # in stream order, after the collective
                comm.alltoall(send, recv)
                copy_out()
                return self._cuda_done(outputs)
            return _work([comm.ialltoall(send, recv)], outputs, after=copy_out)
        if _HAS_V and len({t.dtype for t in outputs + inputs}) == 1:
            # uneven: one alltoallv between flat buffers, the received blocks
            # copied into the outputs once it completes
            send = torch.cat([t.reshape(-1) for t in inputs])
            recv = send.new_empty(sum(t.numel() for t in outputs))
            req = comm.ialltoallv(send, [t.numel() for t in inputs], recv,
                                  [t.numel() for t in outputs])
            return _work([req], outputs, after=lambda: self._unflatten(recv, outputs))
        return self._pairwise(comm, [t.contiguous() for t in inputs], outputs, outputs)

    def _pairwise(self, comm, sends, recvs, result):
        # Uneven exchange: one isend and one irecv per peer through Weft's
        # point to point (tag 0x5eed; ordered with the collectives).
        reqs = []
        tmp = [r if r.is_contiguous() else torch.empty_like(r) for r in recvs]
        for p in range(comm.size):
            if tmp[p].numel():
                reqs.append(comm.irecv(tmp[p], p, tag=0x5eed))
        for p in range(comm.size):
            if sends[p].numel():
                reqs.append(comm.isend(sends[p], p, tag=0x5eed))

        def copy_out():
            for r, t in zip(recvs, tmp):
                if r is not t:
                    r.copy_(t)
        if not reqs:
            return _done_work(result)
        return _work(reqs, result, after=copy_out)

    def all_to_all_single(self, output, inp, output_splits, input_splits, opts=None):
        comm, dev = self._comm_for([output, inp])
        even = not output_splits and not input_splits
        if dev and (comm is None or not even):  # splits: alltoallv, on the host
            return self._via_host(self.all_to_all_single, output, inp, output_splits,
                                  input_splits, opts)
        if even:
            if dev:
                comm.alltoall(inp, output)
                return self._cuda_done([output])
            return _work([comm.ialltoall(inp, output)], [output])
        n = comm.size
        ins = list(inp.split(input_splits if input_splits else inp.shape[0] // n))
        outs = list(output.split(output_splits if output_splits else output.shape[0] // n))
        if _HAS_V and inp.dtype == output.dtype and len(ins) == n and len(outs) == n:
            # one alltoallv: the splits (along dim 0) are consecutive blocks of
            # the contiguous tensors, so their default displacements serve
            recv = output if output.is_contiguous() else \
                torch.empty_like(output, memory_format=torch.contiguous_format)
            req = comm.ialltoallv(inp.contiguous(), [t.numel() for t in ins], recv,
                                  [t.numel() for t in outs])
            return _work([req], [output],
                         after=None if recv is output else lambda: output.copy_(recv))
        return self._pairwise(comm, [t.contiguous() for t in ins], outs, [output])

    alltoall_base = all_to_all_single

    def gather(self, output_lists, inputs, opts):
        # Point to point, as Weft's own gather (linear) does: each rank's
        # tensor may have its own size (torch allows it), which only the
        # root knows, so every rank takes the same way whatever the sizes.
        if inputs[0].is_cuda:
            return self._via_host(self.gather, output_lists, inputs, opts)
        comm, _ = self._comm_for(inputs)
        root, me, n = opts.rootRank, comm.rank, comm.size
        inp = inputs[0].contiguous()
        none = inp.new_empty(0)
        if me != root:
            return self._pairwise(comm, [inp if q == root else none for q in range(n)],
                                  [none] * n, output_lists)
        outs = output_lists[0]
        _check_slots("gather", outs, n, me, inp)
        outs[me].copy_(inp.view(outs[me].shape))
        return self._pairwise(comm, [none] * n, [none if q == me else outs[q] for q in range(n)],
                              output_lists)

    def scatter(self, outputs, input_lists, opts):
        # Point to point, for the reason gather gives.
        if outputs[0].is_cuda:
            return self._via_host(self.scatter, outputs, input_lists, opts)
        comm, _ = self._comm_for(outputs)
        root, me, n = opts.rootRank, comm.rank, comm.size
        out = outputs[0]
        none = out.new_empty(0)
        if me != root:
            return self._pairwise(comm, [none] * n, [out if q == root else none for q in range(n)],
                                  outputs)
        ins = input_lists[0]
        _check_slots("scatter", ins, n, me, out)
        out.copy_(ins[me].reshape(out.shape))
        return self._pairwise(comm, [none if q == me else ins[q].contiguous() for q in range(n)],
                              [none] * n, outputs)

    def barrier(self, opts=None):
        if _sync(opts):
            self._comm.barrier()
            return _done_work(None)
        return _work([self._comm.ibarrier()], None)

    def send(self, tensors, dst, tag):
        if tensors[0].is_cuda:
            return self._via_host(self.send, tensors, dst, tag, outputs=False)
        comm, _ = self._comm_for(tensors)
        return _work([comm.isend(t, dst, tag=tag) for t in tensors], tensors)

    def recv(self, tensors, src, tag):
        if tensors[0].is_cuda:
            return self._via_host(self.recv, tensors, src, tag)
        comm, _ = self._comm_for(tensors)
        return _work([comm.irecv(t, src, tag=tag) for t in tensors], tensors)

    def recv_anysource(self, tensors, tag):
        raise WeftError(ERR_UNSUPPORTED, "recv from any source is not served by Weft")


# ---- bool tensors -------------------------------------------------------------
# Weft has no bool datatype; torch's bool is one byte holding 0 or 1. A
# collective on bool tensors runs on uint8 views of them (the same memory),
# and a reduction takes the op that keeps every byte 0 or 1, as NCCL's
# backend does: SUM is MAX (any), PRODUCT is MIN (all); AVG is refused.
# DDP broadcasts a model's buffers at its start, bool ones included.
_BOOL_OPS = {dist.ReduceOp.SUM.value: dist.ReduceOp.MAX,
             dist.ReduceOp.PRODUCT.value: dist.ReduceOp.MIN}


def _first_tensor(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, list) and a:
            t = _first_tensor(a)
            if t is not None:
                return t
    return None


def _as_uint8(x, views):
    if isinstance(x, torch.Tensor):
        if x.dtype is not torch.bool:
            return x
        v = x.view(torch.uint8)
        views[id(v)] = x
        return v
    if isinstance(x, list):
        return [_as_uint8(y, views) for y in x]
    return x


def _restore(x, views):
    if isinstance(x, list):
        return [_restore(y, views) for y in x]
    return views.get(id(x), x)


class _BoolOpts:
    """A collective's options with its reduction mapped for bool data."""

    def __init__(self, opts):
        self._opts = opts

    def __getattr__(self, name):
        return getattr(self._opts, name)

    @property
    def reduceOp(self):
        op = self._opts.reduceOp
        v = getattr(getattr(op, "op", op), "value", None)
        if v == dist.ReduceOp.AVG.value:
            raise WeftError(ERR_OP, "AVG of bool tensors is not defined")
        return dist.ReduceOp(_BOOL_OPS[v]) if v in _BOOL_OPS else op


def _public(method):
    """A collective as torch calls it: bool tensors served (above), and the
    Work returned pinned (_pin). Tensors of dtypes Weft has no datatype for
    (float8, ...) need nothing here: weft.Comm moves them as their bytes in
    the calls that only move data, and refuses them in reductions."""
    def wrapped(self, *args, **kwargs):  # torch passes opts= by name in places
        t = _first_tensor(args)
        if t is None or t.dtype is not torch.bool:
            return _pin(method(self, *args, **kwargs))
        views = {}
        conv = [_as_uint8(a, views) for a in args]
        conv = [_BoolOpts(a) if hasattr(a, "reduceOp") else a for a in conv]
        kw = {k: _BoolOpts(v) if hasattr(v, "reduceOp") else v for k, v in kwargs.items()}
        work = method(self, *conv, **kw)
        work._result = _restore(work._result, views)
        return _pin(work)
    wrapped.__name__ = method.__name__
    wrapped.__doc__ = method.__doc__
    wrapped.__wrapped__ = method
    return wrapped


for _name in ("allreduce", "allreduce_coalesced", "broadcast", "reduce", "allgather",
              "all_gather_single", "all_gather_single_coalesced", "reduce_scatter",
              "reduce_scatter_single", "reduce_scatter_single_coalesced", "alltoall",
              "all_to_all_single", "gather", "scatter", "barrier", "send", "recv"):
    setattr(WeftBackend, _name, _public(getattr(WeftBackend, _name)))
WeftBackend._allgather_base = WeftBackend.all_gather_single
WeftBackend.allgather_into_tensor_coalesced = WeftBackend.all_gather_single_coalesced
WeftBackend._reduce_scatter_base = WeftBackend.reduce_scatter_single
WeftBackend.reduce_scatter_tensor_coalesced = WeftBackend.reduce_scatter_single_coalesced
WeftBackend.alltoall_base = WeftBackend.all_to_all_single


def _create(dist_opts, backend_opts):
    """The creator given to register_backend (extended API)."""
    rank = dist_opts.group_rank
    size = dist_opts.group_size
    ranks = list(getattr(dist_opts, "global_ranks_in_group", None) or [])
    world = _world_for(dist_opts, ranks)
    if world.size == 1 and size > 1:
        raise WeftError(ERR_INVALID_ARG, "torch's group has %d ranks, Weft's (MPI's) world one: "
                        "launch with mpiexec -n N or torchrun, and let init_process_group make "
                        "Weft's world (do not call weft.init() before it)" % size)
    if not ranks:  # a torch that does not say: only the whole world is known
        if size != world.size:
            raise WeftError(ERR_UNSUPPORTED, "weft backend: this torch does not give a group's "
                            "ranks (global_ranks_in_group), so a group of %d of the %d ranks "
                            "cannot be made: use gloo for it" % (size, world.size))
        ranks = list(range(size))
    if max(ranks) >= world.size:
        raise WeftError(ERR_INVALID_ARG, "torch's group has ranks up to %d, Weft's (MPI's) world "
                        "%d ranks: launch with mpiexec -n N or torchrun, and let weft.torch "
                        "initialise Weft (not weft.init() before init_process_group)"
                        % (max(ranks), world.size))
    if world.rank not in ranks or rank != ranks.index(world.rank):
        raise WeftError(ERR_INVALID_ARG, "torch rank %d is Weft (MPI) rank %d: launch with "
                        "mpiexec and let weft.torch set RANK" % (rank, world.rank))
    # A communicator of its own per group: two groups' collectives, which
    # torch lets ranks issue in different relative orders, never meet on one
    # Weft communicator. torch creates a group's backend on its members only,
    # so a group is made by its members alone (weft_comm_create_group).
    if ranks == list(range(world.size)):
        comm = weft.Comm.world()
    else:
        comm = world.create_group(ranks)
    return WeftBackend(rank, size, comm)


def register():
    """Register the "weft" backend with torch.distributed (done on import)."""
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                  devices=["cpu", "cuda"])


# ---- DDP comm hook ---------------------------------------------------------
def allreduce_hook(state, bucket):
    """DDP comm hook: average the bucket's gradients through Weft.

        ddp.register_comm_hook(None, weft.torch.allreduce_hook)

    state: a weft.Comm, or None for the world (created at the first bucket,
    which every rank reaches in the same order). Works whatever the default
    backend is (gloo): DDP's other traffic stays on it."""
    comm = state if isinstance(state, weft.Comm) else world_comm()
    buf = bucket.buffer()
    fut = torch.futures.Future()
    if buf.device.type != "cpu":
        raise WeftError(ERR_UNSUPPORTED, "allreduce_hook takes CPU buckets")
    op = weft.AVG if buf.is_floating_point() else weft.SUM
    req = comm.iallreduce(buf, op=op)

    def on_done(status):
        if status:
            fut.set_exception(WeftError(status, "allreduce_hook"))
        else:
            fut.set_result(buf)
    req.add_done_callback(on_done)
    return fut


register()
if "RANK" not in os.environ and "WORLD_SIZE" not in os.environ and mpi_launcher_key() is not None:
    setup_env()
