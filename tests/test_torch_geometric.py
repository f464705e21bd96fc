"""PyTorch Geometric used unchanged with ``.to("tpu")``: message-passing layers, pooling and
graph utilities give CPU's values and parameter gradients, and a node-classification model
trains as on CPU (strict, fused and compiled).

Graphs are small and seeded, with isolated nodes (the last two take no edge), and run with
int64 and int32 index tensors. CPU's reference always runs on int64 indices: CPU's own gather
misreads an int32 index whose other dimensions are expanded (PyG expands every index that way,
so on CPU the backward of its int32 scatters is wrong; tpu is right). tpu draws from its own
generator, so dropout_edge and negative_sampling are checked for their seeding and their
invariants rather than against CPU's draws. Sparse layouts are not supported (by design):
layers that build a sparse adjacency (ASAPooling) are left out."""

from __future__ import annotations

import copy
import random

import pytest
import torch
from conftest import TPU, assert_same, raises_as_cpu

import torchtpu

pyg = pytest.importorskip("torch_geometric")
gnn = pytest.importorskip("torch_geometric.nn")
utils = pytest.importorskip("torch_geometric.utils")

N, E, F = 14, 44, 8


def _graph(seed=0, n=N, e=E):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, F, generator=g)
    edge_index = torch.randint(0, max(n - 2, 1), (2, e), generator=g)
    return {"x": x, "edge_index": edge_index, "edge_weight": torch.rand(e, generator=g),
            "edge_attr": torch.randn(e, 3, generator=g),
            "batch": torch.tensor([0] * 5 + [1] * 6 + [3] * 3)[:n]}


def _to(value, device, index_dtype):
    if not isinstance(value, torch.Tensor):
        return value
    if value.dtype == torch.int64:
        value = value.to(index_dtype)
    return value.to(device)


def _forward_and_grads(module, args, device, index_dtype):
    """Outputs, and gradients of the floating outputs' squared sum with respect to the
    floating inputs and the parameters."""
    args = [_to(a, device, index_dtype) for a in args]
    args = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point()
            else a for a in args]
    out = module(*args)
    flat = [o for o in (out if isinstance(out, tuple) else (out,)) if isinstance(o, torch.Tensor)]
    differentiable = [o.float().square().sum() for o in flat if o.requires_grad]
    if not differentiable:
        return flat, ()
    wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    wrt += [p for p in module.parameters() if p.requires_grad]
    return flat, torch.autograd.grad(sum(differentiable), wrt, allow_unused=True)


def _check(make, args, index_dtype=torch.int64, atol=1e-5):
    torch.manual_seed(0)
    cpu = make().eval()
    tpu = copy.deepcopy(cpu).to(TPU)
    out_cpu, grads_cpu = _forward_and_grads(cpu, args, "cpu", torch.int64)
    out_tpu, grads_tpu = _forward_and_grads(tpu, args, TPU, index_dtype)
    # integer outputs (pooled edge indices, batch vectors) keep the index dtype they were given
    out_cpu = [o.to(index_dtype) if o.dtype == torch.int64 and t.dtype == index_dtype else o
               for o, t in zip(out_cpu, out_tpu, strict=True)]
    assert_same(out_tpu, out_cpu, rtol=1e-4, atol=atol)
    assert [g is None for g in grads_tpu] == [g is None for g in grads_cpu]
    assert_same([g for g in grads_tpu if g is not None], [g for g in grads_cpu if g is not None],
                rtol=1e-4, atol=atol)


class _Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _seq(*sizes):
    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:], strict=False)]
    return torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.ReLU())][:-1])


class _APPNPNet(torch.nn.Module):  # APPNP has no parameters of its own
    def __init__(self):
        super().__init__()
        self.lin, self.prop = torch.nn.Linear(F, 4), gnn.APPNP(K=4, alpha=0.1)

    def forward(self, x, edge_index):
        return self.prop(self.lin(x), edge_index)


# name: (module factory, the graph's arguments)
LAYERS = {
    "GCNConv": (lambda: gnn.GCNConv(F, 16), ("x", "edge_index", "edge_weight")),
    "GATConv": (lambda: gnn.GATConv(F, 4, heads=2, edge_dim=3), ("x", "edge_index", "edge_attr")),
    "GATv2Conv": (lambda: gnn.GATv2Conv(F, 4, heads=2), ("x", "edge_index")),
    "SAGEConv": (lambda: gnn.SAGEConv(F, 16), ("x", "edge_index")),
    "SAGEConv max": (lambda: gnn.SAGEConv(F, 16, aggr="max"), ("x", "edge_index")),
    "GINConv": (lambda: gnn.GINConv(_seq(F, 16, 16), train_eps=True), ("x", "edge_index")),
    "GraphConv": (lambda: gnn.GraphConv(F, 16, aggr="mean"), ("x", "edge_index", "edge_weight")),
    "TransformerConv": (lambda: gnn.TransformerConv(F, 4, heads=2, edge_dim=3, beta=True),
                        ("x", "edge_index", "edge_attr")),
    "EdgeConv": (lambda: gnn.EdgeConv(_seq(2 * F, 16)), ("x", "edge_index")),
    "ChebConv": (lambda: gnn.ChebConv(F, 16, K=3), ("x", "edge_index", "edge_weight")),
    "APPNP": (lambda: _APPNPNet(), ("x", "edge_index")),
    "TopKPooling": (lambda: gnn.TopKPooling(F, ratio=0.5), ("x", "edge_index", None, "batch")),
    "SAGPooling": (lambda: gnn.SAGPooling(F, ratio=0.5), ("x", "edge_index", None, "batch")),
    "global pools": (lambda: _Fn(lambda x, b: (gnn.global_mean_pool(x, b), gnn.global_max_pool(
        x, b), gnn.global_add_pool(x, b, size=5))), ("x", "batch")),
    "softmax aggregation": (lambda: gnn.aggr.SoftmaxAggregation(learn=True),
                            ("x", "batch", None, 4)),
    "HeteroLinear": (lambda: gnn.HeteroLinear(F, 16, 4), ("x", "batch")),  # index2ptr
}

# PyG refuses int32 here: TopK/SAGPooling scatter an int64 arange into an int32 vector.
# (CPU also refuses EdgeConv's max with an int32 index, but only because that index is
# expanded: its expanded-index scatter_reduce takes int64 alone; tpu takes both, as cuda.)
_INT64_ONLY = {"TopKPooling", "SAGPooling"}


def _args(names, graph):
    return [graph[a] if isinstance(a, str) else a for a in names]


@pytest.mark.slow
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_matches_cpu(name, index_dtype):
    make, names = LAYERS[name]
    if index_dtype == torch.int32 and name in _INT64_ONLY:
        torch.manual_seed(0)
        module = make()
        raises_as_cpu(lambda d: _forward_and_grads(copy.deepcopy(module).to(d),
                                                   _args(names, _graph()), d, index_dtype))
        return
    _check(make, _args(names, _graph()), index_dtype)


@pytest.mark.slow
@pytest.mark.parametrize("nodes", [6, 0])
@pytest.mark.parametrize("name", ["GCNConv", "GATConv", "SAGEConv max", "GINConv", "TopKPooling",
                                  "global pools", "softmax aggregation"])
def test_layer_on_a_graph_without_edges_matches_cpu(name, nodes):
    make, names = LAYERS[name]
    _check(make, _args(names, _graph(n=nodes, e=0)))


@pytest.mark.slow
def test_int32_message_passing_and_index2ptr_match_cpu():
    graph = _graph()
    for name in ("GATConv", "HeteroLinear"):
        make, names = LAYERS[name]
        _check(make, _args(names, graph), torch.int32)


UTILITIES = {
    **{f"scatter {r}": lambda x, i, r=r: utils.scatter(x, i, 0, dim_size=N, reduce=r)
       for r in ("sum", "mean", "max", "min", "mul")},
    "softmax": lambda x, i: utils.softmax(x, i, num_nodes=N),
    "to_dense_batch": lambda x, i: utils.to_dense_batch(x, i.sort()[0], batch_size=N),
    "degree": lambda x, i: utils.degree(i, N),
    "to_dense_adj": lambda x, i: utils.to_dense_adj(torch.stack([i, i.flip(0)]), edge_attr=x[:, 0],
                                                    max_num_nodes=N),
    "add_self_loops": lambda x, i: utils.add_self_loops(torch.stack([i, i.flip(0)]), x[:, 0],
                                                        fill_value="mean", num_nodes=N),
    "segment": lambda x, i: utils.segment(x, torch.tensor([0, 10, 10, E], device=x.device,
                                                          dtype=i.dtype), reduce="mean"),
}


@pytest.mark.parametrize("index_dtype", [
    torch.int32, pytest.param(torch.int64, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", [
    pytest.param(name, marks=() if name in ("scatter max", "softmax") else pytest.mark.slow)
    for name in UTILITIES])
def test_utility_matches_cpu(name, index_dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(E, 3, generator=g)
    index = torch.randint(0, N - 2, (E,), generator=g)  # two isolated nodes
    _check(lambda: _Fn(UTILITIES[name]), [x, index], index_dtype)


@pytest.mark.slow
def test_random_utilities_are_seeded_and_valid():
    edge_index = _graph()["edge_index"].to(TPU)
    draws = []
    for _ in range(2):
        torch.manual_seed(3)
        random.seed(3)  # negative_sampling draws its candidates with Python's random
        kept, mask = utils.dropout_edge(edge_index, p=0.3)
        negative = utils.negative_sampling(edge_index, num_nodes=N)
        draws.append((kept, mask, negative))
    assert_same(draws[0], draws[1])
    kept, mask, negative = (t.cpu() for t in draws[0])
    assert_same(kept, edge_index.cpu()[:, mask])
    existing = set(map(tuple, edge_index.cpu().t().tolist()))
    assert not existing & set(map(tuple, negative.t().tolist()))
    assert (negative[0] != negative[1]).all()  # no self-loops by default


class _Net(torch.nn.Module):
    # (not GATConv: its destination attention cancels in each softmax group, so its gradient
    # is rounding noise, which Adam's first step scales up to the learning rate)
    def __init__(self):
        super().__init__()
        self.conv1 = gnn.GCNConv(F, 16)
        self.conv2 = gnn.GCNConv(16, 4, cached=True)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def _train(device, mode, steps=5):
    """Losses and parameters of node classification, ``steps`` steps of Adam."""
    graph = _graph()
    g = torch.Generator().manual_seed(2)
    y, train = torch.randint(0, 4, (N,), generator=g), torch.rand(N, generator=g) < 0.6
    torch.manual_seed(0)
    model = _Net().to(device)
    forward = torch.compile(model, backend="tpu") if mode == "compile" else model
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, edge_index, y, train = (t.to(device) for t in (graph["x"], graph["edge_index"], y, train))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(forward(x, edge_index)[train], y[train])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), list(model.parameters())


@pytest.mark.parametrize("mode", ["strict", pytest.param("fused", marks=pytest.mark.slow),
                                  pytest.param("compile", marks=pytest.mark.slow)])
def test_node_classification_trains_as_cpu(mode):
    expected = _train("cpu", mode)
    with torchtpu.set_eager_mode("fused" if mode == "fused" else "strict"):
        actual = _train(TPU, mode)
    assert_same(actual, expected, rtol=1e-5, atol=1e-5)
