"""Nonblocking requests: completed out of order, test() polling, waitall,
completion callbacks (exactly once, output in place, whether or not the
request is also waited on), and the GIL released while Weft waits. Run under
both WEFT_PY_COMPLETION modes (thread, inline)."""

import threading
import time

import numpy as np

import weft


def _until(pred, seconds=20.0):
    end = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def test_out_of_order(comm):
    p = comm.size
    bufs = [np.full(n, comm.rank + k, dtype=np.float64) for k, n in enumerate((1, 100, 5000,
                                                                             70000, 3, 900))]
    reqs = [comm.iallreduce(b, op=weft.SUM if k % 2 == 0 else weft.MAX)
            for k, b in enumerate(bufs)]
    # the last two by polling test(), the rest waited on in reverse order
    assert _until(lambda: reqs[5].test())
    assert _until(lambda: reqs[4].test())
    for r in reversed(reqs[:4]):
        r.wait()
    for k, b in enumerate(bufs):
        want = sum(q + k for q in range(p)) if k % 2 == 0 else p - 1 + k
        assert (b == want).all(), k
    assert all(r.handle == 0 for r in reqs)
    assert reqs[0].wait() is bufs[0]  # waiting again: released, same result
    assert reqs[0].test()


def test_waitall_mixed(comm):
    p, r = comm.size, comm.rank
    a = np.full(10, r, dtype=np.int32)
    b = np.zeros(p, dtype=np.int32)
    c = np.full(4, 7 if r == 0 else 0, dtype=np.int64)
    reqs = [comm.iallreduce(a), comm.iallgather(np.array([r], dtype=np.int32), b),
            comm.ibcast(c, root=0), comm.ibarrier()]
    res = weft.waitall(reqs)
    assert res[0] is a and (a == p * (p - 1) // 2).all()
    assert list(b) == list(range(p))
    assert (c == 7).all()


def test_callback_exactly_once(comm):
    n_req = 60
    counts = [0] * n_req
    seen = [None] * n_req
    statuses = [None] * n_req
    reqs, bufs = [], []
    for k in range(n_req):
        x = np.full(64, comm.rank + 1, dtype=np.float32)
        req = comm.iallreduce(x)

        def cb(status, k=k, x=x):
            counts[k] += 1
            statuses[k] = status
            seen[k] = float(x[0])  # the output is in place when the callback runs
        req.add_done_callback(cb)
        reqs.append(req)
        bufs.append(x)
        if k % 3 == 0:
            req.wait()              # waited on at once
        elif k % 3 == 1:
            _until(req.test)        # polled
        # else: neither; the completion dispatcher releases it
    assert _until(lambda: all(c >= 1 for c in counts))
    time.sleep(0.05)  # a second firing would show up here
    total = comm.size * (comm.size + 1) / 2
    assert counts == [1] * n_req
    assert statuses == [0] * n_req
    assert seen == [total] * n_req
    # released by the dispatcher (or by the waiter) in every case
    assert _until(lambda: all(r.handle == 0 for r in reqs))


def test_callback_after_completion(comm):
    x = np.ones(3)
    req = comm.iallreduce(x)
    req.wait()
    got = []
    req.add_done_callback(got.append)  # already complete: runs at once
    assert got == [0]


def test_gil_released_while_waiting(comm):
    # The main thread waits in Weft for a message that another Python thread
    # sends 0.2 s later. With the GIL held during the wait this would hang
    # until WEFT_TIMEOUT.
    r = comm.rank
    got = np.zeros(4, dtype=np.int64)
    req = comm.irecv(got, r, tag=11)
    ticks = []

    def sender():
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.2:
            ticks.append(1)
            time.sleep(0.01)
        comm.isend(np.arange(4, dtype=np.int64) + r, r, tag=11).wait()
    th = threading.Thread(target=sender)
    th.start()
    req.wait()
    th.join()
    assert list(got) == [r, r + 1, r + 2, r + 3]
    assert len(ticks) >= 5
