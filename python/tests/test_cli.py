"""The example and the benchmark: --help and --version exit 0, a bad option
or value exits 2 naming it (no MPI, no torch import needed for that)."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = [os.path.join(HERE, "..", "examples", "ddp_fashion_mnist.py"),
           os.path.join(HERE, "..", "benchmarks", "bench_torch.py"),
           os.path.join(HERE, "..", "benchmarks", "lab", "call_distribution.py")]
BAD = {"ddp_fashion_mnist.py": [(["--bogus"], "--bogus"), (["--epochs", "0"], "--epochs"),
                                (["--lr", "nan"], "--lr"), (["--backend", "nccl"], "--backend")],
       "bench_torch.py": [(["--bogus"], "--bogus"), (["-m", "8:4"], "-m/--sizes"),
                          (["-m", "x"], "-m/--sizes"), (["-r", "0"], "-r/--repeats"),
                          (["--threads", "0"], "--threads")],
       "call_distribution.py": [(["--bogus"], "--bogus"), (["-m", "2"], "-m/--sizes"),
                                (["-m", "1Q"], "-m/--sizes"), (["-p", "nccl"], "-p/--paths"),
                                (["-i", "0"], "-i/--iterations")]}


def run(script, args):
    return subprocess.run([sys.executable, script] + args, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("script", SCRIPTS, ids=os.path.basename)
def test_help_version_and_usage_errors(script):
    name = os.path.basename(script)
    h = run(script, ["--help"])
    assert h.returncode == 0 and "usage:" in h.stdout
    v = run(script, ["--version"])
    assert v.returncode == 0 and v.stdout.strip() == name + " 0.1.0"
    for args, opt in BAD[name]:
        r = run(script, args)
        assert r.returncode == 2, (args, r.stderr)
        assert opt in r.stderr, (args, r.stderr)


def run_module(args, **env):
    return subprocess.run([sys.executable, "-m", "weft"] + args, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **env))


def test_module_report_help_version_and_usage_errors():
    """python -m weft (one process, no launcher): the report names the
    library loaded and says there is no launcher; --help, --version; a bad
    option, and --torch without --check, exit 2 naming the option."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PMI_RANK", "PMI_SIZE", "PMI_FD", "MPI_LOCALRANKID", "RANK", "WORLD_SIZE",
                        "TORCHELASTIC_RUN_ID")}
    r = subprocess.run([sys.executable, "-m", "weft"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    import weft
    fields = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    assert fields["library"].strip() == weft.library_path(), r.stdout
    assert fields["weft"].strip().startswith(weft.version()), r.stdout
    assert fields["launcher"].strip().startswith("none"), r.stdout
    assert "transparent huge pages:" in fields["pages"], r.stdout
    # the GPU line agrees with the library's own answer
    from weft import _lib
    want = "usable" if _lib.weft_cuda_available() else ("none", "not usable")
    assert fields["cuda"].strip().startswith(want), r.stdout
    h = run_module(["--help"])
    assert h.returncode == 0 and "usage: python -m weft" in h.stdout and "--check" in h.stdout
    v = run_module(["--version"])
    assert v.returncode == 0 and v.stdout.strip() == "weft " + weft.version()
    for args, opt in ((["--bogus"], "--bogus"), (["--torch"], "--torch")):
        b = run_module(args)
        assert b.returncode == 2 and opt in b.stderr, (args, b.stderr)


def test_module_report_cuda_cases(monkeypatch):
    """The report's GPU line in each case, the library's and torch's answers
    stubbed (a stand-in torch module: the real one must not be imported
    after a CUDA libweft, see _lib._torch_first): the case to act on (torch
    sees a GPU this libweft cannot use) says what to do."""
    import types
    import weft.__main__ as m
    from weft import _lib
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "torch", torch)
    for weft_gpu, torch_gpus, want in ((1, 2, "usable (torch sees 2 GPU(s))"),
                                       (0, 2, "not usable by this libweft, though torch sees 2"),
                                       (0, 0, "none (")):
        monkeypatch.setattr(_lib, "weft_cuda_available", lambda v=weft_gpu: v)
        torch.cuda.is_available = lambda n=torch_gpus: n > 0
        torch.cuda.device_count = lambda n=torch_gpus: n
        got = m._cuda(True)
        assert got.startswith(want), got
        assert ("-Dcuda=enabled" in got) == (weft_gpu == 0 and torch_gpus > 0), got
    assert m._cuda(False).startswith(("usable:", "none (")), m._cuda(False)


def test_module_report_into_closed_pipe():
    """python -m weft | head: a reader that left early ends the report
    quietly (exit 0, no traceback)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "weft"], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
