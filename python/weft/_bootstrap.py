"""Weft's world without an MPI launcher: init_with_store().

A launcher such as torchrun starts the processes and gives them a key-value
store, their rank and their number, but no MPI process manager: MPI_Init
alone would make each process a world of one. Weft's world is MPI's, so
rank 0 serves what MPICH's MPI_Init asks of a process manager (PMI-1, the
protocol MPICH's Hydra speaks: a line of `cmd=... key=value ...` per
request), and every process hands MPI_Init a connection to it (PMI_FD,
PMI_RANK, PMI_SIZE, as Hydra does). The server's address travels through
the store. MPI_Init then makes one MPI world of every process, over the
transports it would use under mpiexec.

The server lives in rank 0's process, on a thread of its own, for the whole
job: MPI_Init and MPI_Finalize talk to it (a key-value exchange of MPI's
addresses and barriers); nothing else does. It admits a connection only
with the job's token (random, published in the store beside the address)
and stops listening once every rank is in.

Thread contract: init_with_store() from one thread per process, before
anything else initialises Weft or MPI; it returns when Weft is initialised.
"""

import atexit
import os
import secrets
import selectors
import socket
import sys
import threading
import time

from ._errors import WeftError, ERR_INVALID_ARG, ERR_TIMEOUT, ERR_MPI

_KEY = "weft/bootstrap"
_HELLO = "weft-pmi1"
# What the server tells MPI's PMI client: Hydra's sizes. A request line
# holds a value of up to vallen_max characters.
_KVSNAME_MAX, _KEYLEN_MAX, _VALLEN_MAX = 256, 64, 1024
_server = None  # rank 0's server, kept until the process exits


def process_mapping(hosts):
    """The PMI_process_mapping value for the ranks' host names (by rank):
    MPICH reads from it which ranks share a node. Nodes are numbered by
    first appearance; each block (first node, nodes, ranks per node) covers
    consecutive ranks, and consecutive nodes of equal counts share a block:
    8 ranks on two hosts in order give (vector,(0,2,4))."""
    ids = {}
    runs = []  # [node, count] of consecutive ranks on one node
    for h in hosts:
        node = ids.setdefault(h, len(ids))
        if runs and runs[-1][0] == node:
            runs[-1][1] += 1
        else:
            runs.append([node, 1])
    blocks = []  # [first node, nodes, ranks per node]
    for node, count in runs:
        b = blocks[-1] if blocks else None
        if b and b[2] == count and node == b[0] + b[1]:
            b[1] += 1
        else:
            blocks.append([node, 1, count])
    return "(vector," + ",".join("(%d,%d,%d)" % tuple(b) for b in blocks) + ")"


class _Conn:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.rank = None  # set by the hello line
        self.host = None
        self.finalized = False


class PmiServer:
    """A PMI-1 server for `size` processes. start() binds and runs it on a
    thread; address is (host name, port) once started. Thread: start() and
    wait() from one thread; the serving thread owns every other field."""

    def __init__(self, size, token, timeout):
        self.size = size
        self.token = token
        self.timeout = timeout
        self.kvsname = "weft_kvs_" + token[:8]
        self.error = None  # why the job's PMI ended early, or None
        self._sel = selectors.DefaultSelector()
        self._listen = socket.create_server(("", 0), backlog=min(size, 1024))
        self.address = (os.environ.get("WEFT_PY_BOOTSTRAP_ADDR") or socket.gethostname(),
                        self._listen.getsockname()[1])
        self._by_rank = {}
        self._kvs = {}
        self._barrier = []
        self._closed = 0  # ranks whose connection has ended (after finalize or not)
        self._mapping = None
        self._thread = threading.Thread(target=self._run, name="weft-pmi", daemon=True)

    def start(self):
        self._listen.setblocking(False)
        self._sel.register(self._listen, selectors.EVENT_READ, None)
        self._thread.start()

    def wait(self, timeout):
        """Wait until every rank has finalised or gone (or timeout seconds)."""
        self._thread.join(timeout)

    # ---- the serving thread ----
    def _run(self):
        deadline = time.monotonic() + self.timeout
        try:
            while self._closed < self.size and self.error is None:
                left = None
                if self._listen is not None:  # not everyone is in yet
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._fail("%d of %d ranks connected within %.0f s"
                                   % (len(self._by_rank), self.size, self.timeout))
                        break
                for key, _ in self._sel.select(left):
                    # an event of this batch may be for what an earlier one
                    # closed (the listener, once everyone is in; a dropped rank)
                    if key.data is None:
                        if self._listen is not None:
                            self._accept()
                    elif key.data.sock.fileno() >= 0:
                        self._read(key.data)
        except Exception as e:  # a bug here must not pass silently
            self._fail("server error: %r" % (e,))
        finally:
            for key in list(self._sel.get_map().values()):
                key.fileobj.close()
            self._sel.close()

    def _fail(self, why):
        if self.error is None:
            self.error = why
            print("weft bootstrap: %s; closing every rank's connection" % why, file=sys.stderr)

    def _accept(self):
        try:
            s, _ = self._listen.accept()
        except BlockingIOError:
            return
        s.setblocking(False)
        self._sel.register(s, selectors.EVENT_READ, _Conn(s))

    def _drop(self, c):
        if c.sock.fileno() < 0:  # dropped already
            return
        self._sel.unregister(c.sock)
        c.sock.close()
        if c.rank is not None:
            self._closed += 1
            if not c.finalized:
                self._fail("rank %d left before MPI_Finalize" % c.rank)

    def _read(self, c):
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(c)
            return
        c.buf += data
        if c.rank is None and len(c.buf) > 4096:  # no hello line: not a rank of ours
            self._sel.unregister(c.sock)
            c.sock.close()
            return
        self._drain(c)

    def _drain(self, c):
        # a rank's requests wait until every rank is in: the node map
        # (PMI_process_mapping) needs every host
        while b"\n" in c.buf and c.sock.fileno() >= 0 and (c.rank is None
                                                            or self._listen is None):
            line, c.buf = c.buf.split(b"\n", 1)
            self._line(c, line.decode("utf-8", "replace").strip())

    def _send(self, c, text):
        try:
            c.sock.setblocking(True)
            c.sock.sendall((text + "\n").encode())
            c.sock.setblocking(False)
        except OSError:
            self._drop(c)

    def _hello(self, c, line):
        parts = line.split(" ")
        ok = len(parts) == 4 and parts[0] == _HELLO and secrets.compare_digest(
            parts[1].encode(), self.token.encode())
        rank = int(parts[2]) if ok and parts[2].isdigit() else -1
        if not ok or not 0 <= rank < self.size or rank in self._by_rank:
            self._sel.unregister(c.sock)  # not one of the job's processes
            c.sock.close()
            return
        c.rank, c.host = rank, parts[3]
        self._by_rank[rank] = c
        self._send(c, _HELLO + " ok")  # admitted: what follows is MPI's
        if len(self._by_rank) == self.size:  # everyone is in: stop listening
            self._sel.unregister(self._listen)
            self._listen.close()
            self._listen = None
            m = process_mapping([self._by_rank[r].host for r in range(self.size)])
            self._mapping = m if len(m) <= _VALLEN_MAX else None
            for other in list(self._by_rank.values()):
                self._drain(other)

    def _line(self, c, line):
        if c.rank is None:
            self._hello(c, line)
            return
        req = {}
        for tok in line.split(" "):
            k, _, v = tok.partition("=")
            req[k] = v
        cmd = req.get("cmd")
        if cmd == "init":
            self._send(c, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
        elif cmd == "get_maxes":
            self._send(c, "cmd=maxes kvsname_max=%d keylen_max=%d vallen_max=%d"
                       % (_KVSNAME_MAX, _KEYLEN_MAX, _VALLEN_MAX))
        elif cmd == "get_appnum":
            self._send(c, "cmd=appnum appnum=0")
        elif cmd == "get_my_kvsname":
            self._send(c, "cmd=my_kvsname kvsname=" + self.kvsname)
        elif cmd == "get_universe_size":
            self._send(c, "cmd=universe_size size=%d" % self.size)
        elif cmd == "put":
            self._kvs[req.get("key", "")] = req.get("value", "")
            self._send(c, "cmd=put_result rc=0 msg=success")
        elif cmd == "get":
            key = req.get("key", "")
            val = self._mapping if key == "PMI_process_mapping" else self._kvs.get(key)
            if val is None:
                self._send(c, "cmd=get_result rc=-1 msg=key_not_found value=unknown")
            else:
                self._send(c, "cmd=get_result rc=0 msg=success value=" + val)
        elif cmd == "barrier_in":
            self._barrier.append(c)
            if len(self._barrier) == self.size:
                waiting, self._barrier = self._barrier, []
                for w in waiting:
                    self._send(w, "cmd=barrier_out")
        elif cmd == "finalize":
            c.finalized = True
            self._send(c, "cmd=finalize_ack")
        elif cmd == "abort":
            self._fail("rank %d called MPI_Abort (exit code %s): %s"
                       % (c.rank, req.get("exitcode", "?"), line.partition("message=")[2]))
        else:  # spawn, publish_name, ...: a job made this way has no process manager
            self._send(c, "cmd=%s_result rc=-1 msg=not_served_by_weft_bootstrap" % cmd)


def _admitted(store, key, rank, node, deadline):
    """A connection to rank 0's server, as the store names it, that the
    server admitted. Retried until the deadline: a store kept from an
    earlier attempt of the job (an elastic restart) may still name that
    attempt's server until this attempt's rank 0 replaces it."""
    me = socket.gethostname()
    while True:
        host, port, token = _store_get(store, key).split(" ")
        addr = "127.0.0.1" if host == me else host
        try:
            left = max(1.0, min(10.0, deadline - time.monotonic()))
            s = socket.create_connection((addr, int(port)), timeout=left)
            s.sendall(("%s %s %d %s\n" % (_HELLO, token, rank, node or me)).encode())
            reply = b""
            while not reply.endswith(b"\n"):  # byte by byte: what follows is MPI's
                b = s.recv(1)
                if not b:
                    break
                reply += b
            if reply == (_HELLO + " ok\n").encode():
                s.settimeout(None)  # MPI's client reads it blocking
                return s
            s.close()
            why = "it did not admit this process"
        except OSError as e:  # refused, unreachable, timed out
            why = str(e)
        if time.monotonic() >= deadline:
            raise WeftError(ERR_TIMEOUT, "init_with_store: rank 0's server %s:%s not reached: "
                            "%s" % (addr, port, why))
        time.sleep(0.2)


def _wait_at_exit(timeout):
    from . import _state
    if not _state["failed"]:  # a failed rank 0 leaves at once (weft._finalize_at_exit)
        _server.wait(timeout)


# What an MPI launcher (Hydra, Open MPI's, a PMIx one, srun with PMI) sets in
# the processes it starts.
_MPI_LAUNCHER_KEYS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                      "MPI_LOCALRANKID")


def mpi_launcher_key():
    """The variable by which an MPI launcher shows that it started this
    process (its world is then MPI's), or None: no MPI launcher, or torchrun
    (which may itself run under srun, whose variables its workers inherit)."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        return None
    return next((k for k in _MPI_LAUNCHER_KEYS if k in os.environ), None)


def _store_get(store, key):
    v = store.get(key)
    return v.decode() if isinstance(v, (bytes, bytearray)) else str(v)


def init_with_store(store, rank, size, timeout=300.0, node=None, key=_KEY):
    """Initialise Weft (and MPI) as one world of `size` processes, this one rank
    `rank`, meeting through `store`: an object with set(key, value) and a
    get(key) that waits until the key is set (torch.distributed's stores).
    Collective over the `size` processes; rank 0 serves MPI's startup
    (module doc). Returns the world communicator (weft.Comm.world()). For
    processes started without an MPI launcher: under mpiexec or srun use
    weft.init(). Raises WeftError: ERR_INVALID_ARG for a bad rank or size or
    when Weft is already initialised, ERR_MPI when the MPI library made
    another world (not MPICH's startup), ERR_TIMEOUT when the ranks do not
    meet (or rank 0's server is not reached) within timeout seconds. node:
    the name of this process's node (default: its host name); ranks that
    give one name are one node to MPI and to Weft's node path, so it must
    name the machine. key: the store's key for the server's address."""
    from . import init, initialized, Comm
    if not (isinstance(size, int) and isinstance(rank, int) and 0 <= rank < size):
        raise WeftError(ERR_INVALID_ARG, "init_with_store: rank %r of size %r" % (rank, size))
    if node is not None and (not isinstance(node, str) or not node or any(
            ch.isspace() for ch in node)):
        raise WeftError(ERR_INVALID_ARG, "init_with_store: node %r is not a name" % (node,))
    if initialized():
        raise WeftError(ERR_INVALID_ARG, "init_with_store: Weft is already initialised "
                        "(call it before anything initialises Weft or MPI)")
    if size == 1:
        init()
        return Comm.world()
    global _server
    if rank == 0:
        token = secrets.token_hex(16)
        _server = PmiServer(size, token, timeout)
        _server.start()
        host, port = _server.address
        store.set(key, "%s %d %s" % (host, port, token))
        # after weft's own finalisation (atexit runs last-registered first):
        # the others' MPI_Finalize still talks to the server. MPI_Finalize
        # meets every rank in a PMI barrier first, so the rest is quick.
        atexit.register(_wait_at_exit, min(timeout, 60.0))
    s = _admitted(store, key, rank, node, time.monotonic() + timeout)
    fd = s.detach()  # MPI's client owns it from here; not inherited by children
    saved = {k: os.environ.get(k) for k in ("PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_PORT",
                                             "PMI_ID")}
    os.environ.update(PMI_FD=str(fd), PMI_RANK=str(rank), PMI_SIZE=str(size))
    os.environ.pop("PMI_PORT", None)
    os.environ.pop("PMI_ID", None)
    try:
        init()
    finally:  # only MPI_Init reads them: children must not see this process's fd
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    world = Comm.world()
    if world.size != size:  # an MPI whose MPI_Init does not speak PMI-1 (not MPICH's)
        raise WeftError(ERR_MPI, "init_with_store: MPI made a world of %d, not %d: this MPI "
                        "library does not take its startup from PMI_FD (MPICH and MPICH-derived "
                        "MPIs do); launch with its own launcher" % (world.size, size))
    return world
