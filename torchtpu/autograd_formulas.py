"""Autograd for ops whose kernels PyTorch picks by device type: CPU's fused ones on 'tpu'.

PyTorch's formulas for ``silu`` and ``mish`` call the fused ``silu_backward`` /
``mish_backward`` only for plain tensors; for a tensor subclass (ours is a wrapper subclass)
they run a composite of 7-11 ops. Those round after each op in bfloat16 (48% and 51% of
gradient elements then differed from CPU's) and cost as many dispatches. These kernels, on
the ``AutogradPrivateUse1`` key, save the input and call the fused backward, as CPU does;
under ``create_graph`` they keep PyTorch's differentiable composite.

``scaled_dot_product_attention`` asks the device which fused kernel to run, and a Python
backend cannot answer (the choice is a C++ dispatch stub), so PyTorch runs its math composite.
Here it runs ``torchtpu::attention`` (ops/attention.py) wherever CPU would run its flash kernel
for the same arguments, and the composite wherever CPU would.

``group_norm``'s gradient of a channels_last input is channels_last on CPU: PyTorch's formula
makes the backward's inputs contiguous on every other device. Here a hook on the node lays the
input's gradient out as CPU's kernel does (one copy, only for such inputs).

``linalg_eigvals`` on CPU skips the eigenvectors (and eig's refusal of a non-finite matrix)
unless the input may need a gradient; for a subclass PyTorch always takes ``linalg_eig``.

``ctc_loss`` runs PyTorch's composite on lengths moved to tpu (below).

``max_pool1d`` on CPU runs a kernel of its own, built for floating dtypes, unless the input
requires grad; other devices always take ``max_pool1d_with_indices``, which pools integers.
Here integer, bool and complex inputs that do not require grad are refused as on CPU.

``one_hot`` checks its classes (reading the values, as on CPU and cuda) only for plain
tensors; for a subclass PyTorch takes an unchecked form, and a class out of range gave a row
of zeros. Here strict eager checks as CPU does, and fused eager at the sync point that runs
it, as for out-of-range indices, and torch.compile at the first sync point after its program.
"""

from __future__ import annotations

import math

import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import _disable_current_modes

from . import config, sparse
from .eager import bounds
from .eager.ctc_checks import ctc_check, defer_ctc_check
from .eager.result_layout import suggested_format
from .eager.values import unwrap
from .ops.dtypes import cpp_name, scalar_type_name
from .runtime import execute
from .tensor import TpuTensor

aten = torch.ops.aten


def _silu(x):
    return x * torch.sigmoid(x)


def _silu_composite(grad, x):
    s = torch.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


def _mish(x):
    return x * torch.tanh(torch.nn.functional.softplus(x))


def _mish_composite(grad, x):
    # PyTorch's infinitely_differentiable_mish_backward: its softplus is exp then log1p (two
    # roundings in low precision, where F.softplus rounds once)
    t = torch.tanh(x.exp().log1p())
    return grad * (t + x * torch.sigmoid(x) * (1 - t * t))


def _kernel(name: str, forward_op, backward_op, composite, plain):
    apply = _function(name, forward_op, backward_op, composite)

    def kernel(x):
        # Inside torch.func transforms an autograd.Function becomes a higher-order op with no
        # PrivateUse1 autograd kernel: there, the op as differentiable ops (PyTorch's own path
        # for subclasses).
        if torch._C._functorch.maybe_current_level() is not None:
            return plain(x)
        out = apply(x)
        if out.requires_grad and out.is_complex():
            # (PyTorch's generated autograd kernel refuses a complex result of an op whose
            # formula is not declared for complex numbers; an autograd.Function does not)
            raise RuntimeError(f"{name.lower()} does not support automatic differentiation for "
                               "outputs with complex dtype.")
        return out

    return kernel


def _function(name: str, forward_op, backward_op, composite):
    def forward(x):
        with torch._C._AutoDispatchBelowAutograd():  # else this kernel again
            return forward_op(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])

    def jvp(ctx, tangent):  # forward-mode AD: the tangent times the derivative
        (x,) = ctx.saved_tensors
        return composite(tangent, x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: a backward that is itself differentiable
            return composite(grad, x)
        return backward_op(grad, x)

    # The class's name names its autograd node (SiluBackward), as grad_fn shows it.
    fn = type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward), "jvp": staticmethod(jvp)})
    return fn.apply


_FLASH = int(torch.nn.attention.SDPBackend.FLASH_ATTENTION)
_SDPA = aten.scaled_dot_product_attention.default


def _stand_in(t: torch.Tensor) -> torch.Tensor:
    # CPU's choice reads shapes, dtypes, the last stride and requires_grad, never values: one
    # row repeated by zero strides stands for a tensor of any size.
    strides = (0,) * (t.dim() - 1) + (1,) if t.dim() else ()
    stand = torch.empty_strided(t.shape, strides, dtype=t.dtype)
    return stand.requires_grad_(t.requires_grad)


def _cpu_runs_flash(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    tensors = [query, key, value] + ([] if attn_mask is None else [attn_mask])
    if any(t.device != query.device or not all(type(n) is int for n in t.shape) for t in tensors):
        return False  # the composite's device error; symbolic shapes stay unspecialised
    if query.shape[-1] == 0 or query.shape[-2] == 0 or key.shape[-2] == 0:
        return False  # CPU returns before choosing a kernel (the chooser refuses these)
    if key.dim() > 1 and value.dim() > 1 and key.shape[-2] != value.shape[-2]:
        # CPU's flash kernel does not check and reads past the shorter one; the composite
        # raises the math path's error instead.
        return False
    if any(t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1 for t in (query, key, value)):
        return False
    with _disable_current_modes():  # torch.compile's fake and tracing modes
        stand = [_stand_in(t) for t in tensors] + [None]
        choice = torch._fused_sdp_choice(stand[0], stand[1], stand[2], stand[3], dropout_p,
                                         is_causal, scale=scale, enable_gqa=enable_gqa)
    return choice == _FLASH


def _has_tangent(*tensors) -> bool:
    """Whether forward-mode AD carries a tangent on any of these (torchtpu::attention has no
    forward formula; CPU's flash kernel raises, the composite computes one)."""
    return fwAD._current_level >= 0 and any(
        t is not None and fwAD.unpack_dual(t).tangent is not None for t in tensors)


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    _validate_sdpa_input(query, key, value, attn_mask)
    if (torch._C._functorch.maybe_current_level() is not None
            or _has_tangent(query, key, value, attn_mask)
            or not _cpu_runs_flash(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                   enable_gqa)):
        return _SDPA.decompose(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                               enable_gqa=enable_gqa)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.ops.torchtpu.attention(query, key, value, attn_mask, is_causal, scale)[0]


def _validate_sdpa_input(query, key, value, attn_mask) -> None:
    """CPU's validate_sdpa_input (its composite runs it; torchtpu::attention would not)."""
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{cpp_name(query.dtype)} key.dtype: {cpp_name(key.dtype)} and value.dtype: "
            f"{cpp_name(value.dtype)} instead.")
    if not query.device == key.device == value.device:
        raise RuntimeError(
            "Expected query, key, and value to have the same device type, but got "
            f"query.device: {query.device} key.device: {key.device} and value.device: "
            f"{value.device} instead.")
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead.")
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, torch.float32,
                                                         query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {cpp_name(attn_mask.dtype)} and  query.dtype: "
            f"{cpp_name(query.dtype)} instead.")


def _attention_setup(ctx, inputs, output):
    query, key, value, attn_mask, ctx.is_causal, ctx.scale = inputs
    ctx.save_for_backward(query, key, value, attn_mask, *output)


def _attention_backward(ctx, grad_out, _grad_logsumexp, _grad_probs):
    query, key, value, attn_mask, out, logsumexp, probs = ctx.saved_tensors
    if torch.is_grad_enabled():  # create_graph: a backward that is itself differentiable
        grads = _attention_grads_composite(grad_out, query, key, value, attn_mask,
                                           ctx.is_causal, ctx.scale)
    else:
        grads = torch.ops.torchtpu.attention_backward(
            grad_out, query, key, value, attn_mask, out, logsumexp, probs, ctx.is_causal,
            ctx.scale)
    return *grads, None, None, None


def _attention_grads_composite(grad_out, query, key, value, attn_mask, is_causal, scale):
    b, hk, size = key.shape[0], key.shape[1], key.shape[-2]
    groups = query.shape[1] // hk
    k, v = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    s = (query @ k.transpose(-2, -1)) * scale
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool else s + attn_mask
    if is_causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, -math.inf)
    p = aten._safe_softmax(s, -1)
    dp = grad_out @ v.transpose(-2, -1)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dk = (ds.transpose(-2, -1) @ query * scale).reshape(b, hk, groups, size, -1).sum(2)
    dv = (p.transpose(-2, -1) @ grad_out).reshape(b, hk, groups, size, -1).sum(2)
    return ds @ k * scale, dk, dv


def _one_hot(self, num_classes=-1):
    if self.dtype != torch.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    checks = isinstance(self, TpuTensor) and config.get("check_indices")
    if self.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
    elif checks and execute.recording() and num_classes != -1:
        bounds.defer_class_check(self, num_classes)
    elif not isinstance(self, TpuTensor) and num_classes != -1 and config.get("check_indices"):
        # torch.compile's trace: asserts its program checks (compile/lower_fx.py), in
        # PyTorch's decomposition's words, which inductor raises
        torch._assert_async(torch.all(self >= 0), "one_hot: Class values must be non-negative.")
        torch._assert_async(torch.all(self < num_classes),
                            "one_hot: Class values must be smaller than num_classes.")
    elif checks or num_classes == -1:
        low, high = (int(v) for v in torch.aminmax(self))
        if low < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes == -1:
            num_classes = high + 1
        elif high >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return torch.eq(self.unsqueeze(-1), torch.arange(num_classes, device=self.device)).long()


def _on_host(v) -> bool:
    """A list of lengths, or a plain CPU tensor (not a tpu or torch.compile's fake one)."""
    return not isinstance(v, torch.Tensor) or (type(v) is torch.Tensor
                                                and v.device.type == "cpu")


def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
              zero_infinity=False):
    """PyTorch's composite, its lengths as tpu tensors. For a tensor subclass PyTorch skips
    cuda's path (which reads the lengths on the host) and divides the mean by the target
    lengths where they are: CPU lengths met a tpu loss. Length lists become tensors too: as
    static arguments each new list compiled the loss again. CPU's checks run first, on lengths
    the host holds or strict eager reads."""
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()
                                            or v.dtype == torch.bool):
            raise RuntimeError(f"{name} must be integral")
    if log_probs.numel() == 0:  # (CPU's composite checks it whatever the lengths' device)
        raise RuntimeError("log_probs tensor must not be empty")
    given = (input_lengths, target_lengths)
    lengths = [torch.as_tensor(v, dtype=torch.int64).to(log_probs.device) for v in given]
    if all(_on_host(v) for v in given):
        ctc_check(log_probs.shape, targets.shape, input_lengths, target_lengths, blank)
    elif (all(_on_host(v) or type(v) is TpuTensor for v in given)
          and config.get("check_indices")):
        if execute.recording():  # fused eager does not wait: checked at the sync point
            defer_ctc_check(log_probs.shape, targets.shape, *map(unwrap, lengths), blank)
        else:  # strict eager reads tpu lengths, as cuda's kernel does
            ctc_check(log_probs.shape, targets.shape,
                      *(v.cpu() if isinstance(v, torch.Tensor) else v for v in given), blank)
    return aten.ctc_loss.Tensor.decompose(log_probs, targets, *lengths, blank, reduction,
                                          zero_infinity)


def _max_pool1d(self, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    args = (kernel_size, stride, padding, dilation, ceil_mode)
    if not (self.requires_grad or self.is_floating_point()):
        # CPU's shape checks (PyTorch's composite makes them for any device), then its kernel's
        aten.max_pool1d.default(torch.empty(self.shape, device="meta"), *args)
        raise NotImplementedError(
            f'"max_pool1d_impl" not implemented for \'{scalar_type_name(self.dtype)}\'')
    return aten.max_pool1d.default.decompose(self, *args)


def _linalg_eigvals(self):
    # CPU computes eigenvectors only where a gradient may be asked for
    # (_may_require_fw_or_bw_grad), which PyTorch also says of every tensor subclass
    if ((torch.is_grad_enabled() and self.requires_grad)
            or fwAD.unpack_dual(self).tangent is not None
            or torch._C._functorch.maybe_current_level() is not None):
        return aten.linalg_eigvals.default.decompose(self)
    return aten._linalg_eigvals.default(self)


def _group_norm(x, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    out = aten.group_norm.default.decompose(x, num_groups, weight, bias, eps, cudnn_enabled)
    layout = suggested_format(x)
    if (layout != torch.contiguous_format and out.grad_fn is not None
            and torch._C._functorch.maybe_current_level() is None):
        out.grad_fn.register_hook(_input_grad_in(layout))
    return out


def _input_grad_in(layout: torch.memory_format):
    def hook(grad_inputs, _grad_outputs):
        grad_input, *rest = grad_inputs
        if grad_input is None:
            return None
        return grad_input.contiguous(memory_format=layout), *rest

    return hook


def _validate_sparse_coo_tensor_args(*args, **kwargs):
    # (its composite checks an is_coalesced=True claim with a CPU kernel stub tpu has not)
    return sparse.validate(args, kwargs)


def _sparse_coo_tensor_of(overload):
    """``torch.sparse_coo_tensor(..., check_invariants=True)``: the composite validates
    through a C++ call that never reaches the kernel above; here it runs unchecked, then
    CPU's checks run on the host (an error leaves nothing behind)."""
    def kernel(indices, values, *rest, **kwargs):
        if not torch.sparse.check_sparse_tensor_invariants.is_enabled():
            return overload.decompose(indices, values, *rest, **kwargs)
        with torch.sparse.check_sparse_tensor_invariants(enable=False):
            result = overload.decompose(indices, values, *rest, **kwargs)
        sparse.validate((indices, values, result.shape, kwargs.get("is_coalesced")), {})
        return result

    return kernel


KERNELS = {
    "_validate_sparse_coo_tensor_args": _validate_sparse_coo_tensor_args,
    "sparse_coo_tensor.indices": _sparse_coo_tensor_of(aten.sparse_coo_tensor.indices),
    "sparse_coo_tensor.indices_size": _sparse_coo_tensor_of(aten.sparse_coo_tensor.indices_size),
    "silu": _kernel("Silu", aten.silu.default, aten.silu_backward.default, _silu_composite,
                    _silu),
    "mish": _kernel("Mish", aten.mish.default, aten.mish_backward.default, _mish_composite,
                    _mish),
    "scaled_dot_product_attention": _sdpa,
    "one_hot": _one_hot,
    "ctc_loss.Tensor": _ctc_loss,
    "ctc_loss.IntList": _ctc_loss,
    "max_pool1d": _max_pool1d,
    "group_norm": _group_norm,
    "linalg_eigvals": _linalg_eigvals,
}


def register(lib: torch.library.Library) -> None:
    for name, kernel in KERNELS.items():
        lib.impl(name, kernel, "AutogradPrivateUse1")
    torch.library.register_autograd("torchtpu::attention", _attention_backward,
                                    setup_context=_attention_setup)
