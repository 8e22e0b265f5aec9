"""DistributedDataParallel on the weft backend trains like DDP on gloo, and
like one process on the whole batch; so does FSDP2 (fully_shard) on the weft
backend, and weft.torch.allreduce_hook in a gloo job; tensor parallelism
(DTensor) gives the unsplit module's outputs and gradients. Run under mpiexec -n 2 (any count works).

Tolerances: weft against gloo, relative 1e-6 (the same sums, possibly added
in another order); DDP against the single-process reference, relative and
absolute 1e-5 (the gradient average over ranks is a different summation
than the full-batch mean)."""

import contextlib

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch as wt

STEPS = 6
BATCH = 8  # per rank


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3)
        self.c2 = nn.Conv2d(8, 16, 3)
        self.f1 = nn.Linear(16 * 5 * 5, 32)
        self.f2 = nn.Linear(32, 10)

    def forward(self, x):
        f = nn.functional
        x = f.max_pool2d(f.relu(self.c1(x)), 2)
        x = f.max_pool2d(f.relu(self.c2(x)), 2)
        return self.f2(f.relu(self.f1(x.flatten(1))))


@pytest.fixture(scope="module")
def groups():
    dist.init_process_group("weft")
    gloo = dist.new_group(backend="gloo")
    yield gloo
    dist.destroy_process_group()


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 1, 28, 28, generator=g), torch.randint(0, 10, (BATCH,),
                                                                      generator=g)


def initial_model():
    torch.manual_seed(7)
    return Net()


def train_ddp(process_group=None, hook=None, device="cpu", state=None, bucket_cap_mb=0.02):
    torch.manual_seed(dist.get_rank() + 100)  # different on each rank: DDP broadcasts rank 0's
    model = (Net() if dist.get_rank() else initial_model()).to(device)
    # small buckets: several allreduces in flight during backward
    ddp = nn.parallel.DistributedDataParallel(model, process_group=process_group,
                                              bucket_cap_mb=bucket_cap_mb)
    if hook is not None:
        ddp.register_comm_hook(state() if callable(state) else state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for s in range(STEPS):
        x, y = batch(s, dist.get_rank())
        opt.zero_grad()
        loss_fn(ddp(x.to(device)), y.to(device)).backward()
        opt.step()
    return [p.detach().cpu().clone() for p in model.parameters()]


def train_serial(world):
    model = initial_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for s in range(STEPS):
        xs, ys = zip(*[batch(s, r) for r in range(world)])
        opt.zero_grad()
        loss_fn(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def assert_trained_like_serial(params, rtol, atol):
    """params moved from the initial model's and match one process trained
    on the whole batch."""
    p_ref = train_serial(dist.get_world_size())
    start = [p.detach() for p in initial_model().parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(params, start))  # it trained
    for a, b in zip(params, p_ref):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_ddp_weft_matches_gloo_and_serial(groups):
    p_weft = train_ddp()
    p_gloo = train_ddp(process_group=groups)
    for a, b in zip(p_weft, p_gloo):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    assert_trained_like_serial(p_weft, rtol=1e-5, atol=1e-5)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no GPU here: CUDA tensors untested")
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


@contextlib.contextmanager
def no_tf32():
    """float32 matrix products on the GPU as on the CPU (the references are
    float32 on the CPU)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@needs_cuda
def test_ddp_cuda_matches_serial(groups):
    # the model on the GPU: DDP's start-up broadcast and shape check go
    # through host copies, its gradient buckets through the stream-bound
    # allreduce
    with no_tf32():
        p_cuda = train_ddp(device="cuda")
    assert_trained_like_serial(p_cuda, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fsdp2_matches_serial(groups, device):
    # FSDP2 (fully_shard): parameters sharded over the ranks, gathered
    # before each layer's forward and backward (all_gather_into_tensor),
    # gradients reduce-scattered (reduce_scatter_tensor), on the weft group;
    # on the GPU those are CUDA tensors on FSDP's own streams
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no FSDP2 (torch.distributed.fsdp.fully_shard)")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh(device, (dist.get_world_size(),))
    model = initial_model().to(device)  # the same on every rank: fully_shard does not broadcast
    for layer in (model.c1, model.c2, model.f1, model.f2):
        fsdp.fully_shard(layer, mesh=mesh)
    fsdp.fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    with no_tf32():
        for s in range(STEPS):
            x, y = batch(s, dist.get_rank())
            opt.zero_grad()
            loss_fn(model(x.to(device)), y.to(device)).backward()
            opt.step()
    p_fsdp = [p.full_tensor().detach().cpu().clone() for p in model.parameters()]
    tol = 1e-5 if device == "cpu" else 1e-4
    assert_trained_like_serial(p_fsdp, rtol=tol, atol=1e-5)


def test_tensor_parallel_matches_serial(groups):
    # tensor parallelism (DTensor): the first Linear split by columns, the
    # second by rows, whose partial sums the weft group adds (functional
    # all_reduce); outputs and gradients against the unsplit module
    tp = pytest.importorskip("torch.distributed.tensor.parallel")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(3)
    # 12 hidden features: split evenly over 1 - 4 ranks
    model = nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 8))
    ref = nn.Sequential(nn.Linear(8, 12), nn.ReLU(), nn.Linear(12, 8))
    ref.load_state_dict(model.state_dict())
    tp.parallelize_module(model, mesh, {"0": tp.ColwiseParallel(), "2": tp.RowwiseParallel()})
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(4))
    y = model(x)
    y.square().sum().backward()
    ref(x).square().sum().backward()
    torch.testing.assert_close(y.detach(), ref(x).detach(), rtol=1e-5, atol=1e-6)
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a.grad.full_tensor(), b.grad, rtol=1e-5, atol=1e-6)


def test_ddp_buffers_of_any_dtype(groups):
    # DDP broadcasts a model's buffers at its start: bool ones, int16 ones,
    # and float8 ones, which Weft moves as bytes (doc/python.md)
    r = dist.get_rank()

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("mask", torch.tensor([True, r == 0, True, False]))
            self.register_buffer("count", torch.tensor([r + 1, -300 * (r + 1)], dtype=torch.int16))
            if hasattr(torch, "float8_e4m3fn"):
                self.register_buffer("scale", torch.tensor([0.5 * (r + 1), 2.0 + r]).to(
                    torch.float8_e4m3fn))

        def forward(self, x):
            return self.lin(x) * self.mask

    ddp = nn.parallel.DistributedDataParallel(Masked())
    ddp(torch.ones(2, 4)).sum().backward()
    assert ddp.module.mask.dtype == torch.bool
    assert ddp.module.mask.tolist() == [True, True, True, False]  # rank 0's
    assert ddp.module.count.dtype == torch.int16 and ddp.module.count.tolist() == [1, -300]
    if hasattr(torch, "float8_e4m3fn"):
        assert ddp.module.scale.dtype == torch.float8_e4m3fn
        assert ddp.module.scale.float().tolist() == [0.5, 2.0]


def test_ddp_join_uneven_inputs(groups):
    # rank r trains 3 + r steps under Join (uneven inputs): the joined ranks
    # shadow the others' allreduces. DDP keeps the forward pass's Work and
    # waits for it in backward (a Work Python has dropped: see _pin in
    # weft/torch.py). Weft's result against gloo's, and every rank agrees.
    from torch.distributed.algorithms.join import Join

    def run(pg):
        torch.manual_seed(5)
        model = nn.Linear(6, 3)
        ddp = nn.parallel.DistributedDataParallel(model, process_group=pg)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        with Join([ddp]):
            for s in range(3 + dist.get_rank()):
                g = torch.Generator().manual_seed(10 * s + dist.get_rank())
                opt.zero_grad()
                ddp(torch.randn(4, 6, generator=g)).square().sum().backward()
                opt.step()
        return torch.cat([q.detach().reshape(-1) for q in model.parameters()])

    p_weft = run(None)
    p_gloo = run(groups)
    mx, mn = p_weft.clone(), p_weft.clone()
    dist.all_reduce(mx, op=dist.ReduceOp.MAX, group=groups)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN, group=groups)
    torch.testing.assert_close(p_weft, p_gloo, rtol=1e-6, atol=1e-7)
    assert torch.equal(mx, mn)


def test_comm_hook_in_gloo_job(groups):
    p_hook = train_ddp(process_group=groups, hook=wt.allreduce_hook)
    p_gloo = train_ddp(process_group=groups)
    for a, b in zip(p_hook, p_gloo):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


HOOKS = ["allreduce", "fp16_compress", "bf16_compress", "powerSGD"]


@pytest.mark.parametrize("name", HOOKS)
def test_torch_comm_hooks_match_gloo(groups, name):
    """torch's own DDP comm hooks train on weft as on gloo. PowerSGD's
    callbacks issue further collectives and wait for them inside the
    callback (on Weft's completion thread: another reader serves the
    completions meanwhile). It runs with one bucket: with several, ranks
    issue its callbacks' collectives in timing-dependent orders (gloo then
    aborts on a size mismatch)."""
    import os
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as ps
    if name == "powerSGD" and os.environ.get("WEFT_PY_COMPLETION") == "inline":
        pytest.skip("inline completion refuses a wait inside a callback (WEFT_ERR_UNSUPPORTED)")
    if name == "powerSGD" and torch.cuda.is_available():
        pytest.skip("torch's PowerSGD hook calls torch.cuda.synchronize(device) on a CPU "
                    "model's device where CUDA is available, on every backend: "
                    "test_torch_comm_hooks_cuda covers it there")
    if name == "powerSGD":
        hook, cap = ps.powerSGD_hook, 100

        def state():  # fresh per run; compression from the third step
            return ps.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                    start_powerSGD_iter=2)
    else:
        hook, cap, state = getattr(default_hooks, name + "_hook"), 0.02, None
    p_weft = train_ddp(hook=hook, state=state, bucket_cap_mb=cap)
    p_gloo = train_ddp(process_group=groups, hook=hook,
                       state=(lambda: ps.PowerSGDState(process_group=groups,
                                                       matrix_approximation_rank=1,
                                                       start_powerSGD_iter=2))
                       if name == "powerSGD" else groups, bucket_cap_mb=cap)
    start = [p.detach() for p in initial_model().parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(p_weft, start))  # it trained
    for a, b in zip(p_weft, p_gloo):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


@needs_cuda
@pytest.mark.parametrize("name", ["fp16_compress", "powerSGD"])
def test_torch_comm_hooks_cuda(groups, name):
    """Compression hooks with the model on the GPU: the compressed buckets
    are CUDA tensors (fp16, or PowerSGD's P and Q with the collectives its
    callbacks issue). Against the same hook and model on gloo (which copies
    CUDA tensors to the host): sums in another order, so the tolerance of a
    compressed gradient (a flipped fp16 rounding moves a parameter by ~1e-5)."""
    import os
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook as ps
    if name == "powerSGD" and os.environ.get("WEFT_PY_COMPLETION") == "inline":
        pytest.skip("inline completion refuses a wait inside a callback (WEFT_ERR_UNSUPPORTED)")

    def state(pg):
        if name != "powerSGD":
            return pg
        return lambda: ps.PowerSGDState(process_group=pg, matrix_approximation_rank=1,
                                        start_powerSGD_iter=2)
    hook = ps.powerSGD_hook if name == "powerSGD" else default_hooks.fp16_compress_hook
    cap = 100 if name == "powerSGD" else 0.02
    with no_tf32():
        p_cuda = train_ddp(hook=hook, state=state(None), bucket_cap_mb=cap, device="cuda")
        p_gloo = train_ddp(process_group=groups, hook=hook, state=state(groups),
                           bucket_cap_mb=cap, device="cuda")
    start = [p.detach() for p in initial_model().parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(p_cuda, start))  # it trained
    for a, b in zip(p_cuda, p_gloo):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_ranks_agree(groups):
    # every rank ends with the same parameters (checked through gloo)
    params = torch.cat([p.reshape(-1) for p in train_ddp()])
    mx, mn = params.clone(), params.clone()
    dist.all_reduce(mx, op=dist.ReduceOp.MAX, group=groups)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN, group=groups)
    assert torch.equal(mx, mn)

