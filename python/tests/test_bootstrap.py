"""Weft's world without an MPI launcher (weft.init_with_store, and torchrun
with the weft backend). Run by one process, not under mpiexec: it starts the
jobs itself (bootstrap_job.py, torchrun_job.py) and kills what it started,
also when a check fails."""

import os
import selectors
import signal
import socket
import subprocess
import sys
import time

import pytest

import weft
from weft import _bootstrap

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
TORCHRUN = os.path.join(os.path.dirname(PY), "torchrun")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher_free_env(**extra):
    """This environment without what a launcher (mpiexec, torchrun) set in
    it, plus extra: the jobs here are started as no launcher would."""
    env = dict(os.environ, **extra)
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE",
              "PMI_FD", "MPI_LOCALRANKID", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    return env


def run_all(cmds, timeout, env=None):
    """Start every command in a session of its own, wait for all of them
    (timeout seconds in all), kill every process group that is left.
    Returns [(returncode, output)]."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True, env=env) for c in cmds]
    deadline = time.monotonic() + timeout
    out = []
    try:
        for p in procs:
            try:
                o, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                o, _ = p.communicate()
                o += "\n[killed: the job ran past %.0f s]" % timeout
            out.append((p.returncode, o))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            try:  # what the process left in its group (torchrun's workers)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return out


def test_process_mapping():
    pm = _bootstrap.process_mapping
    assert pm(["a"]) == "(vector,(0,1,1))"
    assert pm(["a"] * 4 + ["b"] * 4) == "(vector,(0,2,4))"
    assert pm(["a", "b", "a", "b"]) == "(vector,(0,2,1),(0,2,1))"
    assert pm(["a", "a", "b", "c", "c"]) == "(vector,(0,1,2),(1,1,1),(2,1,2))"
    assert pm(["b", "a", "b"]) == "(vector,(0,2,1),(0,1,1))"


def test_bad_arguments_refused():
    for rank, size in ((2, 2), (-1, 2), (0, 0), ("0", 2)):
        with pytest.raises(weft.WeftError) as e:
            weft.init_with_store(None, rank, size)
        assert e.value.status == weft.ERR_INVALID_ARG
    with pytest.raises(weft.WeftError) as e:
        weft.init_with_store(None, 0, 2, node="two words")
    assert e.value.status == weft.ERR_INVALID_ARG
    assert not weft.initialized()


class Client:
    """One rank's side of the PMI connection, as MPI's client speaks it."""

    def __init__(self, server, token, rank, host):
        self.s = socket.create_connection(("127.0.0.1", server.address[1]), timeout=10)
        self.s.sendall(("weft-pmi1 %s %d %s\n" % (token, rank, host)).encode())
        self.f = self.s.makefile("r")
        assert self.f.readline() == "weft-pmi1 ok\n"  # admitted

    def ask(self, line):
        self.s.sendall((line + "\n").encode())
        return self.f.readline().strip()


def dropped(sock):
    """The server closed sock without a word (a reset, when it closed with
    some of our bytes unread). Closes sock."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True
    finally:
        sock.close()


def test_server_protocol():
    srv = _bootstrap.PmiServer(2, "t0ken" * 4, 20.0)
    srv.start()  # a daemon thread: gone with this process if a check fails
    intruder = socket.create_connection(("127.0.0.1", srv.address[1]), timeout=10)
    intruder.sendall(b"weft-pmi1 wrong 0 h\n")
    assert dropped(intruder)
    for junk in ("weft-pmi1 t\u00f6ken 0 h\n".encode(), b"x" * 5000):  # nor do these break it
        intruder = socket.create_connection(("127.0.0.1", srv.address[1]), timeout=10)
        intruder.sendall(junk)
        assert dropped(intruder)
    a = Client(srv, "t0ken" * 4, 0, "hostA")
    # rank 0's requests wait until every rank is in (the node map needs all)
    a.s.sendall(b"cmd=init pmi_version=1 pmi_subversion=1\n")
    sel = selectors.DefaultSelector()
    sel.register(a.s, selectors.EVENT_READ)
    assert sel.select(0.5) == []
    b = Client(srv, "t0ken" * 4, 1, "hostB")
    assert a.f.readline().startswith("cmd=response_to_init pmi_version=1")
    assert "vallen_max=1024" in b.ask("cmd=get_maxes")
    assert b.ask("cmd=get_universe_size") == "cmd=universe_size size=2"
    kvs = a.ask("cmd=get_my_kvsname").split("kvsname=")[1]
    assert a.ask("cmd=put kvsname=%s key=k0 value=v0" % kvs).startswith(
        "cmd=put_result rc=0")
    assert b.ask("cmd=get kvsname=%s key=k0" % kvs).endswith("value=v0")
    assert "rc=-1" in b.ask("cmd=get kvsname=%s key=nothing" % kvs)
    assert b.ask("cmd=get kvsname=%s key=PMI_process_mapping" % kvs).endswith(
        "value=(vector,(0,2,1))")
    b.s.sendall(b"cmd=barrier_in\n")
    assert a.ask("cmd=barrier_in") == "cmd=barrier_out"
    assert b.f.readline().strip() == "cmd=barrier_out"
    for c in (a, b):
        assert c.ask("cmd=finalize") == "cmd=finalize_ack"
        c.f.close()
        c.s.close()
    srv.wait(10)
    assert not srv._thread.is_alive() and srv.error is None


@pytest.mark.parametrize("size,nodes", [(1, 0), (2, 0), (3, 0), (4, 2)],
                         ids=["n1", "n2", "n3", "n4-2nodes"])
def test_world_from_store(size, nodes):
    port = free_port()
    env = dict(os.environ, WEFT_ALLREDUCE_ALGO="shm")
    job = os.path.join(HERE, "bootstrap_job.py")
    res = run_all([[PY, job, str(r), str(size), str(port), str(nodes)] for r in range(size)],
                  180, env)
    for r, (rc, out) in enumerate(res):
        assert rc == 0 and "rank %d of %d: ok" % (r, size) in out, out


def test_stale_address_in_store():
    """The store still names an earlier attempt's server (an elastic restart
    keeps it): rank 1 reads that first, is refused, and retries until rank 0
    (started late) has published its own."""
    from datetime import timedelta
    from torch.distributed import TCPStore
    port = free_port()
    store = TCPStore("127.0.0.1", port, 3, True, wait_for_workers=False,
                     timeout=timedelta(seconds=60))
    store.set("weft/bootstrap", "localhost %d %s" % (free_port(), "0" * 32))
    env = dict(os.environ, BOOTSTRAP_TEST_STORE="client", BOOTSTRAP_TEST_DELAY0="2")
    job = os.path.join(HERE, "bootstrap_job.py")
    res = run_all([[PY, job, str(r), "2", str(port), "0"] for r in range(2)], 120, env)
    for r, (rc, out) in enumerate(res):
        assert rc == 0 and "rank %d of 2: ok" % r in out, out


def test_missing_rank_fails_fast():
    """Rank 1 never comes: rank 0 says so and exits within the timeout, no hang."""
    job = os.path.join(HERE, "bootstrap_job.py")
    t0 = time.monotonic()
    [(rc, out)] = run_all([[PY, job, "0", "2", str(free_port()), "0", "3"]], 120)
    assert rc != 0, out
    assert "1 of 2 ranks connected within 3 s" in out, out
    assert time.monotonic() - t0 < 60, out


@pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="no torchrun beside " + PY)
@pytest.mark.parametrize("nproc,base", [(2, ""), (3, ""), (2, "ProcessGroup")],
                         ids=["n2", "n3", "n2-pgbase"])
def test_torchrun(nproc, base):
    env = launcher_free_env(WEFT_PY_TORCH_BASE=base)
    [(rc, out)] = run_all([[TORCHRUN, "--standalone", "--nproc-per-node", str(nproc),
                            os.path.join(HERE, "torchrun_job.py")]], 240, env)
    assert rc == 0, out
    for r in range(nproc):
        assert "rank %d of %d: ok" % (r, nproc) in out, out


@pytest.mark.skipif(not os.path.exists(TORCHRUN), reason="no torchrun beside " + PY)
def test_torchrun_restart_after_failure():
    """Rank 1 raises in the first attempt while rank 0 waits in a collective:
    rank 1 leaves at once (no MPI_Finalize waiting for rank 0), torchrun
    restarts both, and the second attempt (a new world, from the same
    store) trains. Before, rank 1 waited until WEFT_TIMEOUT (600 s here,
    past this test's limit)."""
    env = launcher_free_env(TORCHRUN_TEST_FAIL="1", WEFT_TIMEOUT="600")
    [(rc, out)] = run_all([[TORCHRUN, "--standalone", "--max-restarts", "1",
                            "--nproc-per-node", "2", os.path.join(HERE, "torchrun_job.py")]],
                          150, env)
    assert rc == 0, out
    assert "rank 1 fails in the first attempt" in out, out
    assert "rank 0 of 2: ok" in out and "rank 1 of 2: ok" in out, out


FAILURES = {
    "raise": ("raise RuntimeError('rank 1 fails')", "an unhandled exception"),
    "exit": ("print('rank 1 fails'); sys.exit(3)", "sys.exit(3)"),
    "exit-message": ("sys.exit('rank 1 fails')", "sys.exit('rank 1 fails')"),
}


@pytest.mark.parametrize("how", sorted(FAILURES))
def test_failed_rank_ends_mpiexec_job(how):
    """Under mpiexec: a rank that dies of an exception, or calls sys.exit
    with an error status, ends the job at once (rank 0 waits in a barrier
    for it, WEFT_TIMEOUT is 600 s and the limit 120 s)."""
    fail, why = FAILURES[how]
    script = ("import sys, numpy as np, weft; weft.init(); c = weft.Comm.world(); "
              "x = np.ones(4); c.allreduce(x)\n"
              "if c.rank == 1: " + fail + "\n"
              "c.barrier(); print('rank', c.rank, 'passed the barrier')")
    env = dict(os.environ, WEFT_TIMEOUT="600", WEFT_PY_TORCH_FIRST="0")
    [(rc, out)] = run_all([["mpiexec", "-n", "2", PY, "-c", script]], 120, env)
    assert rc != 0 and "rank 1 fails" in out, out
    assert "passed the barrier" not in out, out
    assert "weft: %s: this process leaves without finalising" % why in out, out


def test_successful_exits_finalize():
    """sys.exit(0), sys.exit(None) and sys.exit(3) on a thread other than the
    main one (which ends that thread only) are no failure: every rank
    finalises (the job's status is 0) and nobody says it leaves without."""
    script = ("import sys, threading, numpy as np, weft; weft.init(); c = weft.Comm.world()\n"
              "t = threading.Thread(target=sys.exit, args=(3,)); t.start(); t.join()\n"
              "x = np.ones(4); c.allreduce(x); c.barrier()\n"
              "if c.rank == 0: print('both ranks passed the barrier', x[0])\n"
              "sys.exit(0 if c.rank == 0 else None)")
    env = dict(os.environ, WEFT_TIMEOUT="60", WEFT_PY_TORCH_FIRST="0")
    [(rc, out)] = run_all([["mpiexec", "-n", "2", PY, "-c", script]], 120, env)
    assert rc == 0, out
    assert "both ranks passed the barrier 2.0" in out, out
    assert "without finalising" not in out, out



@pytest.mark.parametrize("mode", ["thread", "inline"])
def test_callback_error_is_not_fatal(mode):
    """An exception in a completion callback is printed, and the process
    still finalises at exit (only an unhandled one skips that)."""
    script = ("import numpy as np, weft; weft.init(); c = weft.Comm.world(); "
              "x = np.ones(4); r = c.iallreduce(x)\n"
              "def cb(st): raise ValueError('callback fails')\n"
              "r.add_done_callback(cb); r.wait(); print('main done', flush=True)")
    env = dict(os.environ, WEFT_PY_TORCH_FIRST="0", WEFT_PY_COMPLETION=mode)
    [(rc, out)] = run_all([["mpiexec", "-n", "2", PY, "-c", script]], 120, env)
    assert rc == 0 and out.count("main done") == 2, out
    assert "callback fails" in out and "leaves without finalising" not in out, out


TCP_INIT = """
import sys, torch, torch.distributed as dist
import weft, weft.torch
rank, size, port, early = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
if early:
    weft.init()  # a world of one: init_process_group must refuse, saying why
try:
    dist.init_process_group("weft", init_method="tcp://127.0.0.1:" + port, rank=rank,
                            world_size=size)
except weft.WeftError as e:
    print("refused:", e.status == weft.ERR_INVALID_ARG, e, flush=True)
    sys.exit(3)
x = torch.arange(5, dtype=torch.float64) * (rank + 1)
dist.all_reduce(x)
assert torch.equal(x, torch.arange(5, dtype=torch.float64) * (size * (size + 1) // 2)), x
print("rank %d of %d: ok" % (rank, size), flush=True)
"""


@pytest.mark.parametrize("early", [False, True], ids=["tcp-init", "weft-init-first"])
def test_init_method_without_launcher(early):
    """Ranks given to init_process_group by hand (init_method tcp://, no
    RANK or WORLD_SIZE in the environment) make Weft's world through the
    store too; a world of one made by an early weft.init() is refused with a
    message that says what to do."""
    port = str(free_port())
    env = launcher_free_env()
    res = run_all([[PY, "-c", TCP_INIT, str(r), "2", port, str(int(early))] for r in range(2)],
                  120, env)
    for r, (rc, out) in enumerate(res):
        if early:
            assert rc == 3 and "refused: True" in out and "weft.init()" in out, out
        else:
            assert rc == 0 and "rank %d of 2: ok" % r in out, out


def test_module_check():
    """python -m weft --check: under mpiexec on 2 ranks and under torchrun
    (through torch.distributed) every rank passes; a wrong allreduce result
    (Comm.allreduce made to do nothing) fails the job, naming it."""
    env = dict(os.environ, WEFT_TIMEOUT="60")
    jobs = [["mpiexec", "-n", "2", PY, "-m", "weft", "--check"]]
    if os.path.exists(TORCHRUN):
        jobs.append([TORCHRUN, "--standalone", "--nproc-per-node", "2", "-m", "weft", "--check",
                     "--quiet"])
    broken = ("import sys, weft, weft.__main__ as m\n"
              "weft.Comm.allreduce = lambda self, *a, **k: None\n"
              "sys.exit(m.main(['--check', '--quiet']))")
    results = [run_all([cmd], 120, env if cmd[0] == "mpiexec" else launcher_free_env())[0]
               for cmd in jobs]
    (rc, out), = run_all([["mpiexec", "-n", "2", PY, "-c", broken]], 120, env)
    assert rc != 0 and "allreduce gave" in out and "passed" not in out, out
    rc0, out0 = results[0]
    assert rc0 == 0 and "weft check: 2 ranks passed" in out0 and "launcher:" in out0, out0
    assert "an MPI launcher" in out0, out0
    if len(results) > 1:
        rc1, out1 = results[1]
        assert rc1 == 0 and "weft check: 2 ranks passed" in out1 and "torch.distributed" in out1, out1

