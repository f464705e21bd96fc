"""Shared by the third-party optimizer tests: two small models (an MLP; an embedding, LayerNorm
and MLP block as in a transformer), a few training steps on CPU and on tpu from the same
weights and batches, and the comparisons (losses, parameters and every state tensor or number
after each step)."""

from __future__ import annotations

import torch
from conftest import TPU
from torch.utils._pytree import tree_flatten


class Block(torch.nn.Module):
    def __init__(self, width: int = 8, vocab: int = 11):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.ln = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, 2 * width)
        self.fc2 = torch.nn.Linear(2 * width, width)
        self.head = torch.nn.Linear(width, 3)

    def forward(self, idx):
        h = self.emb(idx)
        h = h + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(h))))
        return self.head(h.mean(1))


def mlp(width: int = 12) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(6, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, 3))


def batches(kind: str, steps: int, batch: int = 5):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        if kind == "block":
            x = torch.randint(0, 11, (batch, 4), generator=g)
        else:
            x = torch.randn(batch, 6, generator=g)
        yield x, torch.randn(batch, 3, generator=g)


def state_of(opt) -> list:
    """(key, value) for every tensor and number in the optimizer's state, parameter by
    parameter, then the groups' numbers (D-Adaptation's d, Prodigy's d and k live there)."""
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            state = opt.state.get(p, {})
            for key in sorted(state, key=str):
                # (objects kept in state, as Shampoo's grafting rule, are compared by what
                # they hold where it is state: not here)
                out += [(str(key), _host(leaf)) for leaf in tree_flatten(state[key])[0]
                        if isinstance(leaf, (torch.Tensor, int, float, bool, str))]
        for key in sorted(k for k, v in group.items()
                          if isinstance(v, (int, float, torch.Tensor)) and k != "params"):
            out.append((f"group {key}", _host(group[key])))
    return out


def _host(value):
    if not isinstance(value, torch.Tensor):
        return value
    if type(value).__name__.startswith("OptimState"):  # (torchao's quantized state)
        value = value.dequantize()
    return value.detach().cpu().clone()


def train(make, device, *, kind: str = "block", steps: int = 5, closure: bool = False,
          make_model=None, dtype=torch.float32, batch: int = 5) -> list:
    """Per step: (loss, parameters, state)."""
    torch.manual_seed(0)
    model = (make_model or (Block if kind == "block" else mlp))().to(device, dtype)
    opt = make(model.parameters())
    history = []
    for x, y in batches(kind, steps, batch):
        x, y = x.to(device, dtype if x.is_floating_point() else x.dtype), y.to(device, dtype)

        def loss_fn(x=x, y=y):
            opt.zero_grad()
            loss = (model(x) - y).square().mean()
            loss.backward()
            return loss

        if closure:
            loss = opt.step(loss_fn)
        else:
            loss = loss_fn()
            opt.step()
        history.append((loss.detach().cpu().clone(),
                        [p.detach().cpu().clone() for p in model.parameters()], state_of(opt)))
    return history


def assert_matches_cpu(make, *, rtol: float = 1e-5, state_rtol: float | None = None,
                       **kwargs) -> None:
    """Each step's loss, parameters and state as CPU's. The parameters' atol is relative to
    each tensor's scale (XLA reassociates fused sums); ``state_rtol`` for state whose float32
    rounding the optimizer amplifies on CPU as much."""
    state_rtol = state_rtol or rtol
    cpu, tpu = train(make, "cpu", **kwargs), train(make, TPU, **kwargs)
    for step, ((loss_t, params_t, state_t), (loss_c, params_c, state_c)) in enumerate(
            zip(tpu, cpu, strict=True)):
        torch.testing.assert_close(loss_t, loss_c, rtol=rtol, atol=1e-6)
        for a, e in zip(params_t, params_c, strict=True):
            torch.testing.assert_close(a, e, rtol=rtol, atol=1e-6 + rtol * e.abs().max().item(),
                                       msg=lambda m, step=step: f"step {step} params: {m}")
        assert [k for k, _ in state_t] == [k for k, _ in state_c]
        for (key, a), (_, e) in zip(state_t, state_c, strict=True):
            if isinstance(e, torch.Tensor):
                assert a.dtype == e.dtype and a.shape == e.shape, key
                scale = e.abs().max().item() if e.is_floating_point() and e.numel() else 0.0
                torch.testing.assert_close(
                    a, e, rtol=state_rtol, atol=1e-6 + state_rtol * scale,
                    msg=lambda m, key=key, step=step: f"step {step} state {key}: {m}")
            elif isinstance(e, float):
                assert a == e or abs(a - e) <= 1e-6 + state_rtol * abs(e), (step, key, a, e)
            else:
                assert a == e, (step, key)


def assert_as_close_to_float64_as_cpu(make, *, factor: float = 4.0, floor: float = 1e-5,
                                      **kwargs) -> None:
    """For steps through ill-conditioned linear algebra (inverse matrix roots, eigenbases),
    where float32 rounding on CPU itself moves parameters past 1e-5: after each step tpu's
    parameters are within ``factor`` times CPU's distance (or ``floor``) of a float64 run."""
    exact = train(make, "cpu", dtype=torch.float64, **kwargs)
    runs = [train(make, device, **kwargs) for device in ("cpu", TPU)]
    for step, (ref, on_cpu, on_tpu) in enumerate(zip(exact, *runs, strict=True)):
        def error(run, ref=ref):
            return max(((a.double() - e).abs().max() / e.abs().max()).item()
                       for a, e in zip(run[1], ref[1], strict=True))

        assert error(on_tpu) <= max(factor * error(on_cpu), floor), (step, error(on_tpu),
                                                                     error(on_cpu))
