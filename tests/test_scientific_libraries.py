"""Scientific-ML libraries used unchanged with ``.to("tpu")`` give CPU's values, dtypes, shapes
and gradients: torchdiffeq (fixed-step and adaptive solvers, adjoint gradients, events, fused
eager), normflows (RealNVP, Glow blocks, neural spline flows: log_prob, the inverse pass that
sampling runs, training steps) and e3nn (spherical harmonics, tensor products, Gate, a small
equivariant network).

Inputs and initial weights are drawn on CPU and moved, so both devices start from the same
numbers. Each library is imported inside its tests, so a missing one skips only its own tests.
The default tests keep one cheap forward case per library (~10 s cold); gradients, both dtypes,
every solver and the whole networks are ``slow`` (cold compiles)."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import TPU, assert_same

import torchtpu

F32 = dict(rtol=1e-4, atol=1e-4)
F64 = dict(rtol=1e-9, atol=1e-10)


def _tol(dtype):
    return F32 if dtype == torch.float32 else F64


def _assert_grads(model, model_tpu, **tol):
    for (name, p), (_, q) in zip(model.named_parameters(), model_tpu.named_parameters(),
                                 strict=True):
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            assert_same(q.grad, p.grad, **tol)


# ---------------------------------------------------------------------------------------------
# torchdiffeq


class _ODEFunc(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, 2)).to(dtype)

    def forward(self, t, y):
        return self.net(y) * torch.cos(t)


def _ode_pair(dtype, seed=0):
    torch.manual_seed(seed)
    func = _ODEFunc(dtype)
    y0 = torch.randn(4, 2, dtype=dtype)
    t = torch.linspace(0, 1, 5, dtype=dtype)
    return func, copy.deepcopy(func).to(TPU), y0, t


def _check_odeint(method, dtype, options=None, tol=None):
    torchdiffeq = pytest.importorskip("torchdiffeq")
    func, func_tpu, y0, t = _ode_pair(dtype)
    kw = dict(method=method, options=options, rtol=1e-6, atol=1e-7)
    expected = torchdiffeq.odeint(func, y0, t, **kw)
    actual = torchdiffeq.odeint(func_tpu, y0.to(TPU), t.to(TPU), **kw)
    assert_same(actual, expected, **(tol or _tol(dtype)))


def _check_adjoint(dtype):
    torchdiffeq = pytest.importorskip("torchdiffeq")
    func, func_tpu, y0, t = _ode_pair(dtype, seed=1)
    y0_cpu, y0_tpu = y0.clone().requires_grad_(), y0.to(TPU).requires_grad_()
    kw = dict(method="dopri5", rtol=1e-6, atol=1e-7)
    expected = torchdiffeq.odeint_adjoint(func, y0_cpu, t, **kw)
    actual = torchdiffeq.odeint_adjoint(func_tpu, y0_tpu, t.to(TPU), **kw)
    expected.square().sum().backward()
    actual.square().sum().backward()
    assert_same(actual, expected, **_tol(dtype))
    # the adjoint solve runs backwards with its own adaptive steps: float32 drifts a little more
    grad_tol = dict(rtol=1e-3, atol=1e-4) if dtype == torch.float32 else F64
    assert_same(y0_tpu.grad, y0_cpu.grad, **grad_tol)
    _assert_grads(func, func_tpu, **grad_tol)


def test_torchdiffeq_rk4_matches_cpu():
    _check_odeint("rk4", torch.float32, dict(step_size=0.25))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("method", ["euler", "rk4", "midpoint", "dopri5", "bosh3",
                                    "adaptive_heun", "dopri8"])
def test_torchdiffeq_solvers_match_cpu(method, dtype):
    if method == "dopri8" and dtype == torch.float64:
        pytest.skip("see test_torchdiffeq_dopri8_float64_within_solver_tolerance")
    fixed = method in ("euler", "rk4", "midpoint")
    _check_odeint(method, dtype, dict(step_size=0.1) if fixed else None)


@pytest.mark.slow
def test_torchdiffeq_dopri8_float64_within_solver_tolerance():
    """dopri8's error estimate after a step is ~1e-14, a sum of 14 terms that cancel: CPU and
    XLA sum them in another order, which moves it by ~1e-3 relative, and with it the next step
    size. Same step count; the solutions agree to the solver's own tolerance (rtol=1e-6)."""
    _check_odeint("dopri8", torch.float64, tol=dict(rtol=1e-5, atol=1e-6))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torchdiffeq_adjoint_matches_cpu(dtype):
    _check_adjoint(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torchdiffeq_event_matches_cpu(dtype):
    torchdiffeq = pytest.importorskip("torchdiffeq")

    def run(device):
        return torchdiffeq.odeint_event(
            lambda t, y: 1 - y, torch.zeros(2, dtype=dtype, device=device),
            torch.tensor(0.0, dtype=dtype, device=device), event_fn=lambda t, y: y[0] - 0.5,
            method="dopri5", rtol=1e-8, atol=1e-8)

    assert_same(run(TPU), run("cpu"), **_tol(dtype))


@pytest.mark.slow
def test_torchdiffeq_dopri5_fused_matches_cpu():
    # each adaptive step reads its error norm on the host: a sync point per step in fused eager
    with torchtpu.set_eager_mode("fused"):
        _check_odeint("dopri5", torch.float32)


# ---------------------------------------------------------------------------------------------
# normflows


def _realnvp(nf, dim=2, layers=4):
    mask = torch.tensor([0, 1] * (dim // 2))
    flows = []
    for i in range(layers):
        scale = nf.nets.MLP([dim, 8, dim], init_zeros=False)
        shift = nf.nets.MLP([dim, 8, dim], init_zeros=False)
        flows += [nf.flows.MaskedAffineFlow(mask if i % 2 else 1 - mask, shift, scale),
                  nf.flows.ActNorm(dim)]
    return nf.NormalizingFlow(nf.distributions.DiagGaussian(dim), flows)


def _glow_affine(nf, dim=4):
    flows = []
    for _ in range(2):
        flows += [nf.flows.AffineCouplingBlock(nf.nets.MLP([dim // 2, 8, dim], init_zeros=False)),
                  nf.flows.Permute(dim, mode="swap")]
    return nf.NormalizingFlow(nf.distributions.DiagGaussian(dim), flows)


def _spline(layer: str, blocks: int):
    """A rational-quadratic spline flow of ``blocks`` ``layer`` + LULinearPermute blocks."""

    def build(nf, dim=2):
        flows = []
        for _ in range(blocks):
            flows += [getattr(nf.flows, layer)(dim, 1, 8), nf.flows.LULinearPermute(dim)]
        return nf.NormalizingFlow(nf.distributions.DiagGaussian(dim, trainable=False), flows)

    return build


_FLOWS = {"realnvp": (_realnvp, 2), "glow_affine": (_glow_affine, 4),
          "autoregressive_spline": (_spline("AutoregressiveRationalQuadraticSpline", 3), 2),
          "coupled_spline": (_spline("CoupledRationalQuadraticSpline", 2), 2)}


def _check_flow(name, dtype, steps):
    nf = pytest.importorskip("normflows")
    make, dim = _FLOWS[name]
    torch.manual_seed(0)
    model = make(nf).to(dtype)
    # wide enough that some points fall in the splines' linear tails (outside [-3, 3])
    x = (torch.randn(64, dim) * 2).to(dtype)
    with torch.no_grad():
        model.log_prob(x)  # ActNorm initialises itself from the first batch
    model_tpu = copy.deepcopy(model).to(TPU)
    tol = _tol(dtype)
    assert_same(model_tpu.log_prob(x.to(TPU)), model.log_prob(x), **tol)

    # sampling = base draw (on CPU here) + the forward pass
    z = torch.randn(16, dim, dtype=dtype)
    with torch.no_grad():
        assert_same(model_tpu.forward_and_log_det(z.to(TPU)), model.forward_and_log_det(z), **tol)

    opt = torch.optim.Adam(model.parameters(), 1e-3)
    opt_tpu = torch.optim.Adam(model_tpu.parameters(), 1e-3)
    grad_tol = dict(rtol=1e-3, atol=1e-3) if dtype == torch.float32 else F64
    for _ in range(steps):
        loss, loss_tpu = model.forward_kld(x), model_tpu.forward_kld(x.to(TPU))
        opt.zero_grad()
        opt_tpu.zero_grad()
        loss.backward()
        loss_tpu.backward()
        # normflows accumulates log q in a float32 zeros() whatever the model's dtype (CPU too)
        assert_same(loss_tpu, loss, **_tol(loss.dtype))
        _assert_grads(model, model_tpu, **grad_tol)
        opt.step()
        opt_tpu.step()


def test_normflows_spline_log_prob_matches_cpu():
    # one rational-quadratic spline layer: bin search, gathers and the linear tails
    nf = pytest.importorskip("normflows")
    torch.manual_seed(0)
    model = nf.NormalizingFlow(nf.distributions.DiagGaussian(2, trainable=False),
                               [nf.flows.AutoregressiveRationalQuadraticSpline(2, 1, 8)])
    x = torch.randn(64, 2) * 2
    assert_same(copy.deepcopy(model).to(TPU).log_prob(x.to(TPU)), model.log_prob(x), **F32)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(_FLOWS))
def test_normflows_flows_train_like_cpu(name, dtype):
    _check_flow(name, dtype, steps=3)


@pytest.mark.slow
@pytest.mark.parametrize("use_lu", [False, True])
def test_normflows_invertible_1x1_conv_matches_cpu(use_lu):
    nf = pytest.importorskip("normflows")
    torch.manual_seed(0)
    model = nf.NormalizingFlow(nf.distributions.DiagGaussian((4, 3, 3)),
                               [nf.flows.Invertible1x1Conv(4, use_lu=use_lu)])
    model_tpu = copy.deepcopy(model).to(TPU)
    x, z = torch.randn(8, 4, 3, 3), torch.randn(8, 4, 3, 3)
    loss, loss_tpu = model.forward_kld(x), model_tpu.forward_kld(x.to(TPU))
    loss.backward()
    loss_tpu.backward()
    assert_same(loss_tpu, loss, **F32)
    _assert_grads(model, model_tpu, rtol=1e-3, atol=1e-3)
    with torch.no_grad():
        assert_same(model_tpu.inverse(z.to(TPU)), model.inverse(z), **F32)


# ---------------------------------------------------------------------------------------------
# e3nn


def test_e3nn_tensor_product_and_harmonics_match_cpu():
    o3 = pytest.importorskip("e3nn.o3")
    torch.manual_seed(0)
    irreps_x, irreps_y = o3.Irreps("1x0e + 1x1o"), o3.Irreps("1o")
    tp = o3.FullyConnectedTensorProduct(irreps_x, irreps_y, "1x0e + 1x1e")
    x, y, vec = irreps_x.randn(10, -1), irreps_y.randn(10, -1), torch.randn(20, 3)
    assert_same(copy.deepcopy(tp).to(TPU)(x.to(TPU), y.to(TPU)), tp(x, y), **F32)
    run = lambda v: o3.spherical_harmonics("0e + 1o + 2e + 3o", v, True, "component")
    assert_same(run(vec.to(TPU)), run(vec), **F32)


@pytest.mark.slow
def test_e3nn_tensor_product_gradients_match_cpu():
    o3 = pytest.importorskip("e3nn.o3")
    torch.manual_seed(0)
    irreps = o3.Irreps("2x0e + 2x1o + 1x2e")
    tp = o3.FullyConnectedTensorProduct(irreps, "0e + 1o", "2x0e + 1x1o + 1x1e + 1x2e")
    tp_tpu = copy.deepcopy(tp).to(TPU)
    x, y = irreps.randn(10, -1), o3.Irreps("0e + 1o").randn(10, -1)
    vec = torch.randn(20, 3)
    vec_cpu, vec_tpu = vec.clone().requires_grad_(), vec.to(TPU).requires_grad_()

    expected, actual = tp(x, y), tp_tpu(x.to(TPU), y.to(TPU))
    sh, sh_tpu = (o3.spherical_harmonics("0e + 1o + 2e + 3o", v, True, "component")
                  for v in (vec_cpu, vec_tpu))
    (expected.sum() + sh.square().sum()).backward()
    (actual.sum() + sh_tpu.square().sum()).backward()
    assert_same(actual, expected, **F32)
    assert_same(sh_tpu, sh, **F32)
    assert_same(vec_tpu.grad, vec_cpu.grad, **F32)
    assert_same(tp_tpu.weight.grad, tp.weight.grad, **F32)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_e3nn_equivariant_network_matches_cpu(dtype):
    o3 = pytest.importorskip("e3nn.o3")
    enn = pytest.importorskip("e3nn.nn")
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # e3nn builds its constants (Clebsch-Gordan...) in it
    try:
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else F64
        torch.manual_seed(1)
        from test_e3nn import _network  # (the network test_e3nn.py rotates and trains)

        net = _network("1x0e")
        net_tpu = copy.deepcopy(net).to(TPU)
        pos, feat = torch.randn(6, 3), torch.randn(6, 1)
        for normalization in ("component", "norm", "integral"):
            run = lambda v, n=normalization: o3.spherical_harmonics("0e+1o+2e+3o+4e", v, True, n)
            assert_same(run(pos.to(TPU)), run(pos), **tol)
        gate = enn.Gate("2x0e", [torch.tanh], "1x0e", [torch.sigmoid], "1x1o")
        xg = gate.irreps_in.randn(10, -1)
        assert_same(gate.to(TPU)(xg.to(TPU)), gate(xg), **tol)

        pos_cpu, pos_tpu = pos.clone().requires_grad_(), pos.to(TPU).requires_grad_()
        out, out_tpu = net(pos_cpu, feat), net_tpu(pos_tpu, feat.to(TPU))
        out.square().sum().backward()
        out_tpu.square().sum().backward()
        assert_same(out_tpu, out, **tol)
        assert_same(pos_tpu.grad, pos_cpu.grad, **tol)
        _assert_grads(net, net_tpu, **tol)

        # rotating the input rotates the output on tpu too
        rot = o3.rand_matrix()
        d_out = o3.Irreps("1x0e + 1x1o").D_from_matrix(rot).to(TPU)
        net_tpu.eval()
        with torch.no_grad():
            rotated = net_tpu(pos.to(TPU) @ rot.to(TPU).T, feat.to(TPU))
            assert_same(rotated, net_tpu(pos.to(TPU), feat.to(TPU)) @ d_out.T,
                        rtol=10 * tol["rtol"], atol=10 * tol["atol"])
        net_tpu.train()

        opt = torch.optim.Adam(net.parameters(), 1e-2)
        opt_tpu = torch.optim.Adam(net_tpu.parameters(), 1e-2)
        for _ in range(3):
            loss = net(pos, feat).square().mean()
            loss_tpu = net_tpu(pos.to(TPU), feat.to(TPU)).square().mean()
            opt.zero_grad()
            opt_tpu.zero_grad()
            loss.backward()
            loss_tpu.backward()
            assert_same(loss_tpu, loss, **tol)
            opt.step()
            opt_tpu.step()
    finally:
        torch.set_default_dtype(default)
