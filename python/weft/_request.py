"""weft.Request and completion callbacks (weft_request_on_complete).

A Request owns a weft_request_t and the arrays Weft reads or writes until
the operation completes. It is released (weft_wait/weft_test) exactly once,
under its own lock, by whichever comes first: wait(), a test() that finds it
done, weft.waitall, or the completion path after the callbacks ran.

Completion callbacks (Request.add_done_callback) run once per request after
the operation completed. Two ways to get there from the thread that
completes the operation (usually Weft's engine thread), chosen by
WEFT_PY_COMPLETION (read at import):

  thread   (default) Weft itself writes a 16-byte record (token, status) to
           a pipe (weft_request_notify_fd: C only, no Python, no GIL on the
           engine thread); a daemon thread reads the pipe and runs the
           Python callbacks (another joins it while a callback waits for a
           later operation: _Dispatcher.spare).
  inline   a ctypes callback runs the Python callbacks on the engine
           thread, which must first take the GIL and holds it for as long as
           they take (every ctypes callback does): while another Python
           thread runs, that wait lasts up to the interpreter's switch
           interval (5 ms), and every Weft operation in flight waits with it.

See doc/python.md for the measurements behind the default. After the Python
callbacks ran, the request is released with weft_test (the ABI allows it on
a complete request) unless a waiter holds its lock, who then releases it:
the lock is only ever tried, never waited for, on the completing thread.
"""

import ctypes
import os
import struct
import sys
import threading

from . import _lib
from ._errors import WeftError, check, ERR_INVALID_REQUEST, ERR_UNSUPPORTED

_MODE = os.environ.get("WEFT_PY_COMPLETION", "thread")
if _MODE not in ("thread", "inline"):
    raise ImportError("weft: WEFT_PY_COMPLETION=%r: expected thread or inline" % _MODE)

# weft_completion_record_t: token, status, reserved (16 bytes, one atomic pipe write)
_REC = struct.Struct("=QiI")


class Request:
    """A nonblocking operation in flight. wait() blocks until it completes
    (raising WeftError if it failed), test() says whether it has, and
    add_done_callback(fn) has fn(status) called once when it completes."""

    __slots__ = ("_h", "_keep", "_lock", "_status", "_result", "__weakref__")

    def __init__(self, handle, keep, result=None):
        self._h = _lib.c_request(handle)
        self._keep = keep          # arrays Weft uses until completion
        self._lock = threading.Lock()
        self._status = None        # the operation's status once released
        self._result = result      # what wait() returns (the output array)

    @property
    def handle(self):
        """The weft_request_t (0 once released)."""
        return self._h.value

    def wait(self):
        """Block (GIL released) until the operation completes; return its
        output array (None for send, barrier). Raises WeftError on failure."""
        with self._lock:
            if self._status is None:
                st = _lib.weft_wait(ctypes.byref(self._h))
                self._status = st
                self._keep = None
        check(self._status, "operation of this request")
        return self._result

    def test(self):
        """True (and the request released) when the operation has completed;
        never blocks. Raises WeftError if it failed."""
        if not self._lock.acquire(blocking=False):
            return False  # another thread is waiting on it
        try:
            if self._status is None:
                done = ctypes.c_int(0)
                st = _lib.weft_test(ctypes.byref(self._h), ctypes.byref(done))
                if not done.value and st == 0:
                    return False
                self._status = st
                self._keep = None
        finally:
            self._lock.release()
        check(self._status, "operation of this request")
        return True

    def _release_done(self):
        # The operation is known complete (its callback fired): release it
        # unless a waiter holds the lock, who releases it itself.
        if self._status is not None or not self._lock.acquire(blocking=False):
            return
        try:
            if self._status is None:
                done = ctypes.c_int(0)
                st = _lib.weft_test(ctypes.byref(self._h), ctypes.byref(done))
                if done.value or st != 0:
                    self._status = st
                    self._keep = None
        finally:
            self._lock.release()

    def add_done_callback(self, fn):
        """Have fn(status) called once when the operation completes (status
        0 or a negative weft_status_t), on the completion thread (see
        WEFT_PY_COMPLETION) or at once if it has completed. fn must not
        block on Weft. One callback per request."""
        if self._status is not None:
            fn(self._status)
            return
        _dispatcher.register(self, fn)


def waitall(requests):
    """Wait for every request (weft_waitall); raise the first error met."""
    reqs = [r for r in requests if r is not None]
    held = []
    try:
        for r in reqs:
            r._lock.acquire()
            held.append(r)
        live = [r for r in reqs if r._status is None]
        if live:
            arr = (_lib.c_request * len(live))(*[r._h.value for r in live])
            st = _lib.weft_waitall(len(live), arr)
            for r in live:
                r._h.value = 0
                r._status = 0
                r._keep = None
            # weft_waitall reports the first error only: every request of a
            # failed waitall carries it.
            if st != 0:
                for r in live:
                    r._status = st
    finally:
        for r in held:
            r._lock.release()
    for r in reqs:
        check(r._status, "weft_waitall")
    return [r._result for r in reqs]


def _report(exc_info):
    """Print a callback's exception as sys.excepthook does, without the mark
    weft.init's hook leaves for a process dying of an unhandled exception:
    this one is not fatal."""
    hook = sys.excepthook
    getattr(hook, "__wrapped__", hook)(*exc_info)


# Readers of the completion pipe at most: one, plus one per callback that
# waits, inside, on a later operation (spare()).
_MAX_READERS = 8


class _Dispatcher:
    def __init__(self):
        self._lock = threading.Lock()
        self._pending = {}          # token -> (request, fn)
        self._next = 1
        self._cfunc = _lib.CALLBACK(self._c_callback)
        self._rfd = self._wfd = None
        self._pid = None
        self._readers = 0           # reader threads started (under _lock)
        self._idle = 0              # of them, those waiting for the pipe (under _lock)
        self._tls = threading.local()

    def _start_thread(self):
        # After fork (or at first use) the reader threads must be ours.
        self._rfd, self._wfd = os.pipe()
        self._pid = os.getpid()
        self._readers = self._idle = 0
        self._add_reader()

    def _add_reader(self):
        # Under _lock (or before any reader exists).
        self._readers += 1
        name = "weft-completion" + ("-%d" % self._readers if self._readers > 1 else "")
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def spare(self):
        """A callback running on a reader is about to wait for a later
        operation's completion (torch's PowerSGD hook waits on a collective's
        future inside a future's callback): make sure another reader serves
        the pipe meanwhile, or that completion would wait for this very
        thread. In inline mode the callback runs on Weft's engine thread,
        which nothing can stand in for: refused (WEFT_ERR_UNSUPPORTED) rather
        than left to hang. A no-op elsewhere. Any thread."""
        if getattr(self._tls, "inline", False):
            raise WeftError(ERR_UNSUPPORTED, "a collective's future taken inside a completion "
                            "callback with WEFT_PY_COMPLETION=inline: a wait on it there would "
                            "stop Weft's engine; use WEFT_PY_COMPLETION=thread (the default)")
        if not getattr(self._tls, "reader", False):
            return
        with self._lock:
            if self._idle == 0 and self._readers < _MAX_READERS:
                self._add_reader()

    def register(self, req, fn):
        if _MODE == "thread" and self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._start_thread()
        with self._lock:
            token = self._next
            self._next += 1
            self._pending[token] = (req, fn)
        if _MODE == "thread":
            st = _lib.weft_request_notify_fd(req._h.value, self._wfd, token)
        else:
            st = _lib.weft_request_on_complete(req._h.value, self._cfunc, token)
        if st != 0:
            with self._lock:
                entry = self._pending.pop(token, None)
            if entry is None:
                return  # cannot happen: the callback fires only on success
            if st == ERR_INVALID_REQUEST and req._status is not None:
                fn(req._status)  # released meanwhile by a waiter
                return
            raise WeftError(st, "weft_request_on_complete")

    def _c_callback(self, arg, status):
        # inline mode: on Weft's completing thread, with the GIL (ctypes took it).
        self._tls.inline = True
        try:
            self._fire(arg or 0, status)
        except BaseException:  # never let an exception into the C caller
            _report(sys.exc_info())
        finally:
            self._tls.inline = False

    def _fire(self, token, status):
        with self._lock:
            entry = self._pending.pop(token, None)
        if entry is None:
            return
        req, fn = entry
        try:
            fn(status)
        finally:
            # Never blocks: a waiter holding the request's lock releases it.
            req._release_done()

    def _run(self):
        # Several readers may share the pipe: every record is one 16-byte
        # write (atomic) and every read asks for whole records, so a read
        # returns whole records only.
        self._tls.reader = True
        buf = b""
        while True:
            with self._lock:
                self._idle += 1
            try:
                chunk = os.read(self._rfd, 4096 * _REC.size)
            except OSError:
                return
            finally:
                with self._lock:
                    self._idle -= 1
            if not chunk:
                return
            buf += chunk
            n = len(buf) // _REC.size
            for i in range(n):
                token, status, _ = _REC.unpack_from(buf, i * _REC.size)
                try:
                    self._fire(token, status)
                except BaseException:
                    _report(sys.exc_info())
            buf = buf[n * _REC.size:]


_dispatcher = _Dispatcher()
MODE = _MODE
