"""One process of a job that test_bootstrap.py starts without an MPI
launcher: it meets the others through a torch TCPStore and
weft.init_with_store, then checks Weft's world and a few collectives
against numpy. Exit status 0 when every check holds.

    python bootstrap_job.py RANK SIZE PORT NODES [TIMEOUT]

NODES 0: the processes report their host; k > 0: rank r reports node
"n{r % k}", so that MPI and Weft see k nodes (ranks interleaved).
BOOTSTRAP_TEST_STORE=client: the store is served by the test, not rank 0;
BOOTSTRAP_TEST_DELAY0=S: rank 0 starts S seconds late."""

import datetime
import os
import sys
import time

import numpy as np
from torch.distributed import TCPStore

import weft

rank, size, port, nodes = (int(a) for a in sys.argv[1:5])
timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
serve = rank == 0 and os.environ.get("BOOTSTRAP_TEST_STORE") != "client"
store = TCPStore("127.0.0.1", port, size, serve, wait_for_workers=False,
                 timeout=datetime.timedelta(seconds=timeout))
if rank == 0:
    time.sleep(float(os.environ.get("BOOTSTRAP_TEST_DELAY0", "0")))
comm = weft.init_with_store(store, rank, size, timeout=timeout,
                            node="n%d" % (rank % nodes) if nodes else None)
assert "PMI_FD" not in os.environ, "the PMI connection leaked into the environment"
assert (comm.rank, comm.size) == (rank, size), (comm.rank, comm.size)

# WEFT_ALLREDUCE_ALGO=shm (set by the test): the single-copy path where every
# rank shares one node, the hierarchical one where MPI sees several nodes
algo = comm.algorithm("allreduce", 1 << 20, weft.FLOAT64)
if size > 1:
    expect = "shm" if nodes <= 1 else "hierarchical"
    assert algo == expect, "allreduce would run %s, expected %s" % (algo, expect)

n = (1 << 20) + 3
x = np.arange(n, dtype=np.float64) * (rank + 1)
comm.allreduce(x)
np.testing.assert_array_equal(x, np.arange(n, dtype=np.float64) * (size * (size + 1) // 2))

b = np.arange(1000, dtype=np.int64) if rank == size - 1 else np.zeros(1000, np.int64)
comm.bcast(b, root=size - 1)
np.testing.assert_array_equal(b, np.arange(1000, dtype=np.int64))

g = np.empty((size, 7), np.float32)
comm.allgather(np.full(7, rank, np.float32), g)
np.testing.assert_array_equal(g, np.repeat(np.arange(size, dtype=np.float32), 7).reshape(size, 7))
comm.barrier()
print("rank %d of %d: ok (%s)" % (rank, size, algo), flush=True)
