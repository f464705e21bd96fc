"""e3nn's equivariant layers used unchanged with ``.to("tpu")``: a small E(3)-equivariant
network (spherical harmonics of the edges, a FullyConnectedTensorProduct weighted by a radial
MLP, BatchNorm, Gate, o3.Linear) gives CPU's output, and on tpu as on CPU that output rotates
with its input (``f(x R^T) = f(x) D(R)^T``); it trains as on CPU, in strict and fused eager
mode (Dynamo cannot trace e3nn's Irreps, on CPU too, so torch.compile is left out). Beside
it: o3.Linear, TensorSquare, ElementwiseTensorProduct, ReducedTensorProducts, the S2 grid
transforms, SO3Activation, NormActivation and CartesianTensor.

(tests/test_scientific_libraries.py covers the tensor product, harmonics and this network's
forward in both dtypes; here are the rotation property, training and the other layers.) The
rotation's Wigner matrices are built on CPU: e3nn keeps its so(3) generators there, so
``wigner_D`` of device angles fails on any accelerator. The default test is the equivariance
of one tensor-product layer; the rest is ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same
from model_zoo_checks import check_outputs, check_training

TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def e3nn():
    return pytest.importorskip("e3nn")


def _rotation(o3, irreps):
    torch.manual_seed(1)
    rotation = o3.rand_matrix()
    return rotation, o3.Irreps(irreps).D_from_matrix(rotation)


def _network(irreps_in: str = "1x0e + 1x1o"):
    """(also tests/test_scientific_libraries.py's network, over scalar features)"""
    from e3nn import nn as enn
    from e3nn import o3
    from e3nn.math import soft_one_hot_linspace

    irreps_sh = o3.Irreps.spherical_harmonics(2)

    class Net(torch.nn.Module):
        """Messages over all ordered pairs of points: a tensor product of the source's
        features and the edge's harmonics, weighted by a radial MLP, summed at the target."""

        def __init__(self):
            super().__init__()
            self.gate = enn.Gate("4x0e", [torch.nn.functional.silu], "2x0e", [torch.sigmoid],
                                 "2x1o")
            self.tp = o3.FullyConnectedTensorProduct(irreps_in, irreps_sh,
                                                     self.gate.irreps_in, shared_weights=False)
            self.radial = enn.FullyConnectedNet([8, 16, self.tp.weight_numel],
                                                torch.nn.functional.silu)
            self.norm = enn.BatchNorm(self.gate.irreps_in)
            self.out = o3.Linear(self.gate.irreps_out, "1x0e + 1x1o")

        def forward(self, pos, feat):
            n = torch.arange(len(pos), device=pos.device)
            src, dst = (g.flatten() for g in torch.meshgrid(n, n, indexing="ij"))
            keep = src != dst
            src, dst = src[keep], dst[keep]
            edge = pos[dst] - pos[src]
            sh = o3.spherical_harmonics(irreps_sh, edge, True, normalization="component")
            emb = soft_one_hot_linspace(edge.norm(dim=1), 0.0, 2.0, 8, basis="smooth_finite",
                                        cutoff=True) * 8**0.5
            msg = self.tp(feat[src], sh, self.radial(emb))
            h = msg.new_zeros(len(pos), msg.shape[1]).index_add(0, dst, msg)
            return self.out(self.gate(self.norm(h)))

    return Net()


def _points():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 3, generator=g), torch.randn(6, 4, generator=g)


def test_tensor_product_layer_rotates_with_its_input(e3nn):
    """One layer, on tpu: rotating the input vectors rotates the output by D(R), and the
    output matches CPU's."""
    from e3nn import o3

    torch.manual_seed(0)
    tp = o3.FullyConnectedTensorProduct("1x0e + 1x1o", "1x1o", "1x0e + 1x1o")
    tp_tpu = copy.deepcopy(tp).to(TPU)
    feat, vec = _points()[1], _points()[0]
    rotation, d_io = _rotation(o3, "1x0e + 1x1o")

    def layer(module, x, v):
        return module(x, o3.spherical_harmonics("1o", v, True, "component"))

    expected = layer(tp, feat, vec)
    actual = layer(tp_tpu, feat.to(TPU), vec.to(TPU))
    rotated = layer(tp_tpu, feat.to(TPU) @ d_io.T.to(TPU), vec.to(TPU) @ rotation.T.to(TPU))
    assert_same(actual, expected, **TOL)
    assert_same(rotated, actual.cpu() @ d_io.T, **TOL)


@pytest.mark.slow
def test_equivariant_network_rotates_with_its_input_and_trains(e3nn):
    from e3nn import o3

    pos, feat = _points()
    rotation, d_io = _rotation(o3, "1x0e + 1x1o")
    torch.manual_seed(0)
    net = _network().eval()  # (BatchNorm's running statistics, which rotate too)
    net_tpu = copy.deepcopy(net).to(TPU)
    out = net_tpu(pos.to(TPU), feat.to(TPU))
    assert_same(out, net(pos, feat), **TOL)
    rotated = net_tpu(pos.to(TPU) @ rotation.T.to(TPU), feat.to(TPU) @ d_io.T.to(TPU))
    assert_same(rotated, out.cpu() @ d_io.T, **TOL)

    def loss(model, device):
        y = model(pos.to(device), feat.to(device))
        return y[:, 0].square().mean() + y[:, 1:].sum(0).square().sum()

    check_training(lambda: copy.deepcopy(_network()), loss, steps=3)
    check_training(lambda: copy.deepcopy(_network()), loss, steps=2, mode="fused")


LAYERS = {
    "linear": lambda o3, enn, x: o3.Linear(x, "3x0e + 2x1o + 1x2e"),
    "tensor_square": lambda o3, enn, x: o3.TensorSquare(x, "2x0e + 1x1e + 1x2e"),
    "norm_activation": lambda o3, enn, x: enn.NormActivation(x, torch.sigmoid),
    "batch_norm": lambda o3, enn, x: enn.BatchNorm(x),
}


@pytest.mark.slow
@pytest.mark.parametrize("layer", LAYERS)
def test_layers_train_as_on_cpu(e3nn, layer):
    from e3nn import nn as enn
    from e3nn import o3

    irreps = o3.Irreps("2x0e + 1x1o + 1x2e")
    torch.manual_seed(0)
    x = irreps.randn(5, -1)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = o3.Linear(irreps, irreps)
            self.layer = LAYERS[layer](o3, enn, irreps)

        def forward(self, v):
            return self.layer(self.pre(v))

    # (a deep copy of e3nn's generated code holds its constants as extra buffers: the CPU
    # model is one too, so both have the same state)
    check_training(lambda: copy.deepcopy(Model()), lambda m, d: m(x.to(d)).square().mean())


@pytest.mark.slow
def test_other_operations_match_cpu(e3nn):
    from e3nn import io as eio
    from e3nn import nn as enn
    from e3nn import o3

    torch.manual_seed(0)
    reduced = o3.ReducedTensorProducts("ij=ji", i="1o")
    so3 = enn.SO3Activation(2, 2, torch.tanh, 6)
    to_grid, from_grid = o3.ToS2Grid(4, (10, 11)), o3.FromS2Grid((10, 11), 4)
    elementwise = o3.ElementwiseTensorProduct("2x0e + 1x1o", "2x0e + 1x1o")
    g = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(4, n, generator=g) for n in (3, 3, 5))
    signal, so3_in = torch.randn(2, 25, generator=g), torch.randn(3, 35, generator=g)
    sym = torch.randn(4, 3, 3, generator=g)
    sym = sym + sym.transpose(1, 2)
    cartesian = eio.CartesianTensor("ij=ji")

    def run(device):
        def on(m):
            return copy.deepcopy(m).to(device)

        grid = on(to_grid)(signal.to(device))
        return (on(reduced)(a.to(device), b.to(device)), grid, on(from_grid)(grid),
                on(so3)(so3_in.to(device)), on(elementwise)(c.to(device), c.to(device)),
                cartesian.to_cartesian(cartesian.from_cartesian(sym.to(device))))

    check_outputs(run, **TOL)
