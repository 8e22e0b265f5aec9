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
