"""Letting Dynamo trace programs whose inputs are tpu tensors.

Dynamo turns every tensor it meets into a FakeTensor and traces on those. It only does that
for ``torch.Tensor`` itself, a few built-in types, and "traceable" wrapper subclasses (those
with ``__tensor_flatten__``). Any other subclass that overrides ``__torch_dispatch__`` --
TpuTensor does -- is treated as an opaque user object: every method call graph-breaks, and
Dynamo even tries to trace our dispatcher.

TpuTensor is not a subclass in that sense: it is how a Python backend represents a tensor on
the PrivateUse1 device, the way a C++ backend uses a plain TensorImpl. FakeTensorMode already
fake-ifies it correctly (meta storage, device ``tpu:0``, requires_grad kept), so all Dynamo
needs is to be told to wrap it like a plain tensor. Dynamo picks the wrapping by exact type
in ``VariableBuilder._type_dispatch``; we add TpuTensor beside ``torch.Tensor`` there.
Its guards are then the ordinary tensor guards (type, dtype, device, shape, strides,
requires_grad), and the backend receives FakeTensors on ``tpu:0``.

AOTAutograd checks at backward time that each incoming gradient has the type it traced
(``torch.Tensor``); a tensor may declare itself equivalent through
``__coerce_same_metadata_as_tangent__``, which TpuTensor does (tensor.py).

Some of PyTorch's meta kernels carry one backend's limits: ``_grouped_mm``'s admits only
bfloat16 (CUDA's kernel), so FakeTensorMode refused Hugging Face's mixture-of-experts layers
on tpu, where transformers calls it for every dtype and our rule computes any. FakeTensorMode
lets a backend answer first (``fake_impls.register_op_impl``); we answer for tpu tensors only.

Dynamo must also never trace the runtime itself. Between graphs (after a graph break, or
inside ``loss.backward()``) eager tpu ops run our dispatcher and JAX in Python frames that
Dynamo would otherwise try to compile; those packages go on Dynamo's skip list. The
reference models in torchtpu.models are user code and stay traceable.
"""

from __future__ import annotations

import importlib.util

import jax
import torch

from ..generator import TpuGenerator
from ..runtime import transfer
from ..tensor import TpuTensor

# Frames Dynamo must run as they are: our runtime, and JAX under it.
_SKIPPED = (
    "torchtpu.eager", "torchtpu.ops", "torchtpu.runtime", "torchtpu.compile", "torchtpu.debug",
    "torchtpu.tensor", "torchtpu.backend", "torchtpu._print", "torchtpu.jit_tracing",
    "torchtpu.distributed", "torchtpu.config", "torchtpu.backward_errors",
    "torchtpu.autograd_formulas", "torchtpu.storage", "torchtpu.serialization",
    "torchtpu.generator", "torchtpu.tensor_types",
    "jax", "jaxlib", "ml_dtypes", "opt_einsum",
)


def install() -> None:
    """Make Dynamo wrap TpuTensor as a plain tensor; idempotent."""
    from torch._dynamo.variables.builder import VariableBuilder

    dispatch_impl = getattr(VariableBuilder, "_type_dispatch_impl", None)
    if dispatch_impl is None or not hasattr(VariableBuilder, "wrap_tensor"):
        raise RuntimeError(
            "torchtpu: this PyTorch's Dynamo has no VariableBuilder._type_dispatch_impl; "
            "torch.compile cannot trace tpu tensors (report this with your torch version)"
        )
    from torch._dynamo import trace_rules

    for name in _SKIPPED:
        if importlib.util.find_spec(name) is not None:
            trace_rules.add(name)
    # The table is built once per trace_numpy setting and cached; patch both.
    for trace_numpy in (False, True):
        dispatch_impl(trace_numpy)[TpuTensor] = VariableBuilder.wrap_tensor
        # As Dynamo wraps PyTorch's own generator; as a subclass of it, it would be taken
        # for an opaque script object, which fake tensors cannot draw from.
        dispatch_impl(trace_numpy)[TpuGenerator] = VariableBuilder.wrap_user_defined
    _not_a_subclass()
    _no_constants_on_tpu()
    _register_fake_rules()
    if transfer.device_put is jax.device_put:
        transfer.device_put = torch._dynamo.disable(jax.device_put)


def _not_a_subclass() -> None:
    """Dynamo's wrapping must not take a tpu tensor for a subclass with its own
    ``__torch_function__`` either: then a result of a comparison with a number (``x > 0``)
    became a "subclass" of torch.Tensor, which a graph break rebuilt through a global Dynamo
    had not installed (NameError '__subclass_Tensor_...'): nn.Transformer's padding mask,
    and a mask read after the graph break at ``x[mask]`` or ``nonzero``."""
    from torch._dynamo.variables import builder

    infer = builder.infer_subclass_type
    if getattr(infer, "_torchtpu", False):
        return

    def infer_subclass_type(value):
        return None if type(value) is TpuTensor else infer(value)

    infer_subclass_type._torchtpu = True
    builder.infer_subclass_type = infer_subclass_type


def _no_constants_on_tpu() -> None:
    """FakeTensorMode keeps small tensors made from constants as real tensors and runs ops on
    them for real, with dispatch disabled. A tpu one then reached PyTorch's PrivateUse1
    kernels, which a Python backend does not have: ``torch.while_loop`` over
    ``torch.tensor(0, device="tpu")`` failed ("could not find kernel for aten.add.out")."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    may_turn_const = FakeTensorMode.may_turn_const
    if getattr(may_turn_const, "_torchtpu", False):
        return

    def cpu_only(self, t: torch.Tensor) -> bool:
        return t.device.type != "tpu" and may_turn_const(self, t)

    cpu_only._torchtpu = True
    FakeTensorMode.may_turn_const = cpu_only


_registered = False


def _register_fake_rules() -> None:
    global _registered
    if _registered:
        return
    from torch._subclasses import fake_impls

    fake_impls.register_op_impl(lambda func: func is torch.ops.aten._grouped_mm.default)(
        _grouped_mm_fake)
    fake_impls.register_op_impl(lambda func: func in _SHAPED_LIKE_FIRST)(_like_first_fake)
    _registered = True


# Ops PyTorch has no meta kernel for (FakeTensor would run them for real, which a tpu tensor
# cannot do), shaped like their first input: the gradients of Gamma's and Dirichlet's samples,
# and the masked softmax of nn.TransformerEncoder's and nn.MultiheadAttention's inference fast
# paths given a padding mask (their ops decompose to it, ops/decomps.py).
_SHAPED_LIKE_FIRST = (torch.ops.aten._standard_gamma_grad.default,
                      torch.ops.aten._dirichlet_grad.default,
                      torch.ops.aten._masked_softmax.default,
                      torch.ops.aten._masked_softmax_backward.default)


def _like_first_fake(mode, func, first, *args, **kwargs):
    if first.device.type != "tpu":
        return NotImplemented
    with mode:
        return torch.empty_like(first)


def _grouped_mm_fake(mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """``_grouped_mm``'s output on tpu (the shapes of ops/linalg.py's rule, any dtype);
    NotImplemented elsewhere, so PyTorch's own meta kernel decides."""
    if mat_a.device.type != "tpu":
        return NotImplemented
    if offs is None:  # one matrix pair per group
        shape = (mat_a.shape[0], mat_a.shape[-2], mat_b.shape[-1])
    elif mat_a.ndim == 2 and mat_b.ndim == 3:  # rows grouped
        shape = (mat_a.shape[0], mat_b.shape[-1])
    elif mat_a.ndim == 2:  # the contraction grouped: one product per group
        shape = (offs.shape[0], mat_a.shape[0], mat_b.shape[1])
    else:  # columns grouped
        shape = (mat_a.shape[1], mat_b.shape[1])
    with mode:
        return torch.empty(shape, dtype=out_dtype or mat_a.dtype, device=mat_a.device)
