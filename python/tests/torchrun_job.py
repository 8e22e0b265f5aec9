"""A training job as torchrun starts it (test_bootstrap.py runs it):
init_process_group("weft") with nothing but torchrun's environment, then
collectives, a group and three DDP steps, each checked against a float64
reference computed here. Exit status 0 when every check holds."""

import os

import numpy as np
import torch
import torch.distributed as dist

import weft.torch

pmi_before = {k: os.environ.get(k) for k in ("PMI_FD", "PMI_RANK", "PMI_SIZE")}
dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
assert (rank, size) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
assert weft.torch.world_comm().size == size and weft.torch.world_comm().rank == rank
# the connection handed to MPI_Init is not left in the environment
assert {k: os.environ.get(k) for k in pmi_before} == pmi_before
# TORCHRUN_TEST_NODES=k: torchrun ran on k nodes, which MPI and Weft must see
# (WEFT_ALLREDUCE_ALGO=shm: single copy on one node, hierarchical on several)
nodes = int(os.environ.get("TORCHRUN_TEST_NODES", "1"))
if size > 1 and os.environ.get("WEFT_ALLREDUCE_ALGO") == "shm":
    algo = weft.torch.world_comm().algorithm("allreduce", 1 << 20)
    assert algo == ("shm" if nodes == 1 else "hierarchical"), algo

x = torch.arange(1 << 16, dtype=torch.float64) * (rank + 1)
dist.all_reduce(x)
assert torch.equal(x, torch.arange(1 << 16, dtype=torch.float64) * (size * (size + 1) // 2))
# TORCHRUN_TEST_FAIL=R: rank R fails in torchrun's first attempt, while the
# others go on to wait for it in a collective (a restart must follow)
if os.environ.get("TORCHRUN_TEST_FAIL") == str(rank) and \
        os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
    raise RuntimeError("rank %d fails in the first attempt" % rank)

b = torch.full((33,), float(rank))
dist.broadcast(b, src=size - 1)
assert torch.equal(b, torch.full((33,), float(size - 1)))

g = torch.empty(size * 5, dtype=torch.int32)
dist.all_gather_into_tensor(g, torch.full((5,), rank, dtype=torch.int32))
assert torch.equal(g, torch.arange(size, dtype=torch.int32).repeat_interleave(5))

pair = sorted({0, size - 1})
grp = dist.new_group(pair)
if rank in pair:
    y = torch.tensor([float(rank + 1)])
    dist.all_reduce(y, group=grp)
    assert y.item() == sum(r + 1 for r in pair), y

# DDP: rank r trains on rows r*B .. r*B+B-1 of one batch; DDP's average of
# the ranks' gradients is the serial gradient of the whole batch
B, D, STEPS, LR = 4, 8, 3, 0.1
rng = np.random.default_rng(7)
X = rng.standard_normal((size * B, D))
Y = rng.standard_normal((size * B, 1))
W0 = rng.standard_normal((1, D))
model = torch.nn.Linear(D, 1, bias=False).double()
with torch.no_grad():
    model.weight.copy_(torch.from_numpy(W0))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=LR)
xs = torch.from_numpy(X[rank * B:(rank + 1) * B])
ys = torch.from_numpy(Y[rank * B:(rank + 1) * B])
for _ in range(STEPS):
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(xs), ys).backward()
    opt.step()
W = W0.copy()
for _ in range(STEPS):  # d/dW mean((XW^T - Y)^2) = 2/N (XW^T - Y)^T X
    W -= LR * 2.0 / len(X) * ((X @ W.T - Y).T @ X)
np.testing.assert_allclose(model.weight.detach().numpy(), W, rtol=1e-12, atol=1e-12)

dist.barrier()
dist.destroy_process_group()
print("rank %d of %d: ok" % (rank, size), flush=True)
