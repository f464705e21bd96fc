"""The fused optimizer steps (``Adam``, ``AdamW``, ``SGD`` and ``Adagrad`` with ``fused=True``):
each parameter list updated in one rule, as PyTorch's CPU kernels compute it
(``ATen/native/cpu/Fused{Adam,SGD,Adagrad}Kernel.cpp``): coefficients computed in
float64 and rounded to the parameter's compute type, half types updated in float32."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from .dtypes import LOW_PRECISION, scalar_type_name
from .elementwise import lerp_from_nearer_end
from .registry import lowering

aten = torch.ops.aten


def _opmath(dtype):
    return jnp.float32 if dtype in LOW_PRECISION else dtype


def _refuse_non_float(kernel: str, params) -> None:
    """CPU's kernels are for floating parameters only; SGD checks just the first one."""
    for p in params:
        if not jnp.issubdtype(p.dtype, jnp.floating):
            raise NotImplementedError(
                f'"{kernel}" not implemented for \'{scalar_type_name(p.dtype)}\'')


def _unless_inf(found_inf, new, old):
    """AMP skips the whole step (grads unscaled too) when the scaler found an inf."""
    if found_inf is None:
        return new
    skip = found_inf.reshape(()) == 1
    return [jnp.where(skip, o, n) for n, o in zip(new, old, strict=True)]




def _unscale(grad, grad_scale, dt):
    g = grad.astype(dt)
    return g if grad_scale is None else g / grad_scale.reshape(()).astype(dt)


def _gradient(p, g, grad_scale, maximize, weight_decay):
    """What every fused step does first: the compute type, the parameter in it, the unscaled
    gradient (handed back to the caller's grads) and the gradient the update follows."""
    dt = _opmath(p.dtype)
    unscaled = _unscale(g, grad_scale, dt)
    x = p.astype(dt)
    g = -unscaled if maximize else unscaled
    if weight_decay != 0:
        g = g + x * jnp.asarray(weight_decay, dt)
    return dt, x, unscaled, g


def _adam(adamw, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr,
          beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
    _refuse_non_float("fused_adam_kernel", params)
    outs = ([], [], [], [], [])
    for i, (p, g, m, v, step) in enumerate(
            zip(params, grads, exp_avgs, exp_avg_sqs, state_steps, strict=True)):
        dt, x, unscaled, g = _gradient(p, g, grad_scale, maximize,
                                       0 if adamw else weight_decay)
        step = step.reshape(()).astype(jnp.float64)
        lr64 = jnp.asarray(lr, jnp.float64).reshape(())
        step_size = (lr64 / (1 - jnp.power(jnp.float64(beta1), step))).astype(dt)
        bc2_sqrt = jnp.sqrt(1 - jnp.power(jnp.asarray(beta2, jnp.float64), step)).astype(dt)
        if adamw and weight_decay != 0:  # decoupled: the parameter decays, not the gradient
            x = x * (1 - lr64 * weight_decay).astype(dt)
        m = lerp_from_nearer_end(m.astype(dt), g, 1 - beta1)
        v = v.astype(dt) * jnp.asarray(beta2, dt) + jnp.asarray(1 - beta2, dt) * g * g
        if amsgrad:
            vmax = jnp.maximum(max_exp_avg_sqs[i].astype(dt), v)
            outs[4].append(vmax.astype(p.dtype))
            v_hat = vmax
        else:
            v_hat = v
        denom = jnp.sqrt(v_hat) / bc2_sqrt + jnp.asarray(eps, dt)
        x = x + -step_size * m / denom
        for out, value in zip(outs, (x, unscaled, m, v), strict=False):
            out.append(value.astype(p.dtype))
    old = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
    return tuple(_unless_inf(found_inf, new, o) for new, o in zip(outs, old, strict=True))


# beta1 picks lerp's formula; the flags pick branches. lr, beta2 and eps stay traced.
_ADAM_STATIC = ("beta1", "amsgrad", "maximize", "weight_decay")


@lowering(aten._fused_adam, static=_ADAM_STATIC)
def _fused_adam(*args, **kwargs):
    return _adam(False, *args, **kwargs)


@lowering(aten._fused_adamw, static=_ADAM_STATIC)
def _fused_adamw(*args, **kwargs):
    return _adam(True, *args, **kwargs)


@lowering(aten._fused_sgd,
          static=("weight_decay", "momentum", "dampening", "nesterov", "maximize", "is_first_step"))
def _fused_sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening,
               nesterov, maximize, is_first_step, grad_scale=None, found_inf=None):
    _refuse_non_float("fused_sgd_kernel", params)
    outs = ([], [], [])
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        dt, x, unscaled, g = _gradient(p, g, grad_scale, maximize, weight_decay)
        outs[1].append(unscaled.astype(p.dtype))
        if momentum != 0:
            if is_first_step:
                buf = g
            else:
                buf = (momentum_buffer_list[i].astype(dt) * jnp.asarray(momentum, dt)
                       + g * jnp.asarray(1 - dampening, dt))
            outs[2].append(buf.astype(p.dtype))
            g = g + jnp.asarray(momentum, dt) * buf if nesterov else buf
        x = x + g * -jnp.asarray(lr, dt).reshape(())
        outs[0].append(x.astype(p.dtype))
    old = (params, grads, momentum_buffer_list)
    return tuple(_unless_inf(found_inf, new, o) for new, o in zip(outs, old, strict=True))


@lowering(aten._fused_adagrad.default, static=("weight_decay", "maximize"))
def _fused_adagrad(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps,
                   maximize, grad_scale=None, found_inf=None):
    _refuse_non_float("fused_adagrad_kernel", params)
    outs = ([], [], [])
    for p, g, s, step in zip(params, grads, state_sums, state_steps, strict=True):
        dt, x, unscaled, g = _gradient(p, g, grad_scale, maximize, weight_decay)
        outs[1].append(unscaled.astype(p.dtype))
        step = step.reshape(()).astype(jnp.float64)
        clr = (jnp.asarray(lr, jnp.float64) / (1 + (step - 1) * lr_decay)).astype(dt)
        s = s.astype(dt) + g * g
        x = x - clr * g / (jnp.sqrt(s) + jnp.asarray(eps, dt))
        outs[0].append(x.astype(p.dtype))
        outs[2].append(s.astype(p.dtype))
    old = (params, grads, state_sums)
    return (*(_unless_inf(found_inf, new, o) for new, o in zip(outs, old, strict=True)),
            list(state_steps))


@lowering(aten._fused_adagrad.tensor_lr, static=("weight_decay", "maximize"))
def _fused_adagrad_tensor_lr(*args, **kwargs):
    return _fused_adagrad(*args, **kwargs)[:3]  # its schema leaves the step counts alone
