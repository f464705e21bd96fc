"""Which torch._decomp decompositions we take, for ops without a rule of their own.

We take PyTorch's core-ATen decompositions (they lower every non-core op to the Core ATen
opset, which our rules cover) plus the wider registered table for ops outside it. Ops with a
rule never decompose: a rule is one XLA program, a decomposition is several.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch._decomp import core_aten_decompositions, decomposition_table
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

aten = torch.ops.aten
_INT_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT

# Decompositions that would loop back into themselves or into ops we handle better directly.
_EXCLUDED = {
    aten._to_copy.default,  # a host/device transfer: handled in eager/special.py
    aten.copy_.default,
    aten.lift_fresh.default,
    aten.sspaddmm.default,  # (its composite calls its out= form, which would come back here)
}

DECOMPOSITIONS: dict = {
    op: fn
    for table in (decomposition_table, core_aten_decompositions())
    for op, fn in table.items()
    if isinstance(op, torch._ops.OpOverload) and op not in _EXCLUDED
}


# Ops that return Python values (a bool) cannot be rules (rules return arrays): they are
# written here over ops that have rules, and read one scalar back, as PyTorch does on cuda.


def _equal(self, other):
    if self.shape != other.shape:
        return False
    return bool(torch.eq(self, other).all())


def _allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(torch.isclose(self, other, rtol, atol, equal_nan).all())


DECOMPOSITIONS[aten.equal.default] = _equal


def _packed_scalars(by_list):
    """addcmul/addcdiv's numbers packed in a CPU tensor: CPU's checks (convert_tensor_to_
    scalar_list), then the numbers read from the host, as the ScalarList overload takes them."""
    def decomp(self, tensor1, tensor2, scalars):
        torch._check(scalars.device.type == "cpu",
                     lambda: f"Expected scalars to be on CPU, got {scalars.device} instead.")
        torch._check(scalars.is_contiguous(), lambda: "Expected scalars to be contiguous.")
        torch._check(scalars.dim() == 1, lambda: "Expected packed scalar Tensor to be of "
                     f"dimension 1. Got {scalars.dim()} instead.")
        torch._check(len(scalars) == len(self), lambda: "Expected length of scalars to match "
                     f"input of length {len(self)} but got {len(scalars)} instead.")
        return by_list(self, tensor1, tensor2, scalars.tolist())

    return decomp


for _name in ("_foreach_addcmul", "_foreach_addcdiv"):
    DECOMPOSITIONS[getattr(aten, _name).Tensor] = _packed_scalars(
        getattr(aten, _name).ScalarList)
DECOMPOSITIONS[aten.allclose.default] = _allclose


def _empty_input_as_sum(decomp):
    """A pointwise loss's backward whose decomposition divides by the input's numel under
    mean reduction: an empty input's (empty) gradient is computed as the sum's, as CPU
    returns it."""

    def run(grad_output, self, target, reduction, *args):
        return decomp(grad_output, self, target, 2 if self.numel() == 0 else reduction, *args)

    return run


for _op in (aten.mse_loss_backward.default, aten.smooth_l1_loss_backward.default,
            aten.huber_loss_backward.default):
    DECOMPOSITIONS[_op] = _empty_input_as_sum(DECOMPOSITIONS[_op])


# rrelu_with_noise writes its slopes into ``noise`` although it is not an in-place op by name:
# the functional form (a rule) computes them, and they are copied back.


def _rrelu_with_noise(self, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    out, slopes = aten.rrelu_with_noise_functional(self, noise, lower, upper, training,
                                                   generator=generator)
    noise.copy_(slopes)
    return out


DECOMPOSITIONS[aten.rrelu_with_noise.default] = _rrelu_with_noise


def _cholesky(self, upper=False):
    """torch.cholesky (deprecated): linalg.cholesky's factor, and CPU's error where a leading
    minor is not positive-definite."""
    factor, info = torch.linalg.cholesky_ex(self, upper=upper)
    torch._linalg_check_errors(info, "cholesky", is_matrix=self.dim() == 2)
    return factor


DECOMPOSITIONS[aten.cholesky.default] = _cholesky


# torch.nn's chunked linear cross-entropy: custom ops (torch_nn::*) whose bodies are Python over
# ATen ops. Below autograd they reach us as opaque ops; their bodies run on tpu as they are.
# (CustomOpDef keeps the body as ``_init_fn``; PyTorch has no public accessor for it.)


def _custom_op_bodies() -> dict:
    try:
        from torch.nn.modules import linear_cross_entropy as lce
    except ImportError:  # a PyTorch without these ops
        return {}
    ops = (lce._linear_cross_entropy_batch_chunked,
           lce._linear_cross_entropy_batch_chunked_no_reduction)
    return {getattr(torch.ops.torch_nn, op._name).default: op._init_fn for op in ops}


CUSTOM_OP_BODIES = _custom_op_bodies()
DECOMPOSITIONS.update(CUSTOM_OP_BODIES)


# nn.TransformerEncoderLayer's and nn.MultiheadAttention's inference fast paths (eval, no
# grad) are single ops on cpu and cuda; here, their steps over ops with rules, in the order
# ATen's kernels take them.


def _check_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
                                       qkv_bias):
    """ATen's argument checks, in its order."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.dim() != 3:
            raise RuntimeError(f"expected 3-D `{name}`, got {t.dim()}-D tensor")
        if name == "query" and query.shape[2] != embed_dim:
            raise RuntimeError(f"passed-in embed_dim {embed_dim} didn't match last dim of "
                               f"query {query.shape[2]}")
    if not query.shape == key.shape == value.shape:
        raise RuntimeError("expected `query`/`key`/`value` shapes to match")
    if qkv_weight.dim() != 2:
        raise RuntimeError(f"expected 2-D `qkv_weight`, got {qkv_weight.dim()}-D tensor")
    if qkv_weight.shape[0] != 3 * embed_dim:
        raise RuntimeError("expected `qkv_weight` first dim to be 3x embed_dim")
    if qkv_weight.shape[1] != embed_dim:
        raise RuntimeError("expected `qkv_weight` second dim to be embed_Dim")
    if qkv_bias.dim() != 1:
        raise RuntimeError(f"expected 1-D `qkv_bias`, got {qkv_bias.dim()}-D tensor")
    if qkv_bias.shape[0] != 3 * embed_dim:
        raise RuntimeError("expected `qkv_bias` first dim and first dim of query to be equal")
    if embed_dim % num_head:
        raise RuntimeError("`embed_dim` must divide evenly by `num_heads`")


def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    _check_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
                                       qkv_bias)
    if query.numel() == 0:  # ATen returns before attending: no weights, even asked for
        return torch.empty_like(query), None
    batch, length = query.shape[:2]
    head = embed_dim // num_head

    def heads(x, weight, bias):
        return F.linear(x, weight, bias).view(batch, length, num_head, head).transpose(1, 2)

    (w_q, w_k, w_v), (b_q, b_k, b_v) = qkv_weight.chunk(3), qkv_bias.chunk(3)
    q = heads(query, w_q, b_q) / math.sqrt(head)  # ATen scales q, then multiplies
    scores = q @ heads(key, w_k, b_k).transpose(-2, -1)
    if mask is None:
        weights = torch.softmax(scores, -1)
    else:  # ATen's masked softmax takes a float mask as bool: any nonzero masks, not adds
        weights = torch._masked_softmax(scores, mask.to(torch.bool), scores.dim() - 1,
                                        mask_type)  # a row masked throughout is NaN
    context = (weights @ heads(value, w_v, b_v)).transpose(1, 2)
    out = F.linear(context.reshape(batch, length, embed_dim), proj_weight, proj_bias)
    if not need_weights:
        return out, None  # ATen's undefined tensor: None in Python, as from cpu
    return out, weights.mean(dim=1) if average_attn_weights else weights


def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
                                   proj_weight, proj_bias, use_gelu, norm_first, eps,
                                   norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                   ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
                                   mask=None, mask_type=None):
    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    tokens = getattr(src, _TOKENS, None)
    if tokens is not None and mask is None:  # a "nested" batch: padding is no key
        mask, mask_type = tokens.logical_not(), 1
    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = aten._native_multi_head_attention(
        x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
        False, True, mask_type)[0] + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    h = norm(x, norm_weight_2, norm_bias_2) if norm_first else x
    h = F.linear(h, ffn_weight_1, ffn_bias_1)
    h = F.gelu(h) if use_gelu else torch.relu(h)
    x = F.linear(h, ffn_weight_2, ffn_bias_2) + x
    out = x if norm_first else norm(x, norm_weight_2, norm_bias_2)
    if tokens is not None:
        setattr(out, _TOKENS, tokens)
    return out


# tpu has no nested tensors. nn.TransformerEncoder's inference fast path packs a padded batch
# into one (when each row's tokens come first), runs its layers on the tokens alone, and pads
# the result with zeros. Here the batch stays dense and remembers where its tokens are: its
# layers take the rest as masked keys, and to_padded_tensor zeroes them, so the numbers are
# CPU's, zeros included.
_TOKENS = "_torchtpu_tokens"


def _nested_tensor_from_mask_left_aligned(t, mask):
    # Every row's tokens first, then its padding. (A sync, as on cpu and cuda.)
    first = torch.arange(mask.shape[-1], device=mask.device) < mask.sum(-1, keepdim=True)
    return torch.equal(mask, first)


def _nested_tensor_from_mask(t, mask, mask_check=True):
    if mask_check and not _nested_tensor_from_mask_left_aligned(t, mask):
        raise RuntimeError("Mask tensor can't be converted to nested tensor: the tokens of "
                           "every row must come first (left-aligned)")
    out = t.clone()
    setattr(out, _TOKENS, mask)
    return out


def _to_padded_tensor(t, padding, output_size=None):
    tokens = getattr(t, _TOKENS, None)
    if tokens is None:
        raise NotImplementedError("to_padded_tensor: expected a nested tensor (tpu has none "
                                  "but nn.TransformerEncoder's padded batches)")
    out = t.masked_fill(tokens.logical_not().unsqueeze(-1), padding)
    if output_size is not None and tuple(output_size) != tuple(out.shape):
        grown = out.new_full(tuple(output_size), padding)
        grown[tuple(slice(0, n) for n in out.shape)] = out
        out = grown
    return out


DECOMPOSITIONS[aten._native_multi_head_attention.default] = _native_multi_head_attention
DECOMPOSITIONS[aten._transformer_encoder_layer_fwd.default] = _transformer_encoder_layer_fwd
DECOMPOSITIONS[aten._nested_tensor_from_mask_left_aligned.default] = \
    _nested_tensor_from_mask_left_aligned
DECOMPOSITIONS[aten._nested_tensor_from_mask.default] = _nested_tensor_from_mask
DECOMPOSITIONS[aten.to_padded_tensor.default] = _to_padded_tensor


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights,
                            padding_idx=-1):
    # CPU's kernel: EmbeddingBag(sparse=True) gets a sparse COO gradient (sparse.py), as there
    if sparse:
        return aten._embedding_bag_sparse_backward(
            grad, indices, offsets, offset2bag, bag_size, num_weights, scale_grad_by_freq, mode,
            per_sample_weights, padding_idx)
    return aten._embedding_bag_dense_backward(
        grad, indices, offset2bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq,
        mode, per_sample_weights, padding_idx)


DECOMPOSITIONS[aten._embedding_bag_backward.default] = _embedding_bag_backward


def _new_zeros_with_same_feature_meta(self, other, self_num_batch_dims=0):
    # Forward-mode AD gives a tangent the primal's memory layout: zeros laid out as `other`
    # (its strides, offset and storage size), with self's leading batch dims (vmap'd jvp) in
    # front, each a whole copy of that storage.
    numel = other.untyped_storage().nbytes() // other.element_size()
    batch = tuple(self.shape[:self_num_batch_dims])
    strides = []
    for n in reversed(batch):
        strides.insert(0, numel)
        numel *= n
    zeros = torch.zeros(numel, dtype=other.dtype, device=other.device)
    return zeros.as_strided(batch + tuple(other.shape), (*strides, *other.stride()),
                            other.storage_offset())


DECOMPOSITIONS[aten._new_zeros_with_same_feature_meta.default] = \
    _new_zeros_with_same_feature_meta


# The `_copy` forms of views (functionalization's, AOTAutograd's backward of scan) that
# PyTorch's tables leave out: the view, copied out.
def _copy_of(view):
    def copied(*args, **kwargs):
        out = view(*args, **kwargs)
        if isinstance(out, (list, tuple)):
            return [t.clone(memory_format=torch.contiguous_format) for t in out]
        return out.clone(memory_format=torch.contiguous_format)

    return copied


for _copy, _view in ((aten._reshape_alias_copy.default, aten._reshape_alias.default),
                     (aten._reshape_copy.default, aten.reshape.default),
                     (aten.select_copy.int, aten.select.int),
                     (aten.detach_copy.default, aten.detach.default),
                     (aten.slice_copy.Tensor, aten.slice.Tensor),
                     (aten.split_copy.Tensor, aten.split.Tensor),
                     (aten.view_as_real_copy.default, aten.view_as_real.default),
                     (aten.view_as_complex_copy.default, aten.view_as_complex.default),
                     (aten._neg_view_copy.default, aten._neg_view.default),
                     (aten._conj_copy.default, aten._conj.default)):
    DECOMPOSITIONS.setdefault(_copy, _copy_of(_view))


# affine_grid's base grid as CPU's kernel builds it (AffineGridGenerator.cpp): linspace(-1, 1)
# scaled by (n - 1) / n, then one batched matmul with theta. PyTorch's decomposition takes a
# linspace of the scaled endpoints, 1 ulp away: on an identity theta the grid lands a ulp off
# pixel centres, where grid_sample's gradient jumps (the spatial transformer tutorial).
def _linspace_from_neg_one(theta, steps: int, align_corners: bool):
    if steps <= 1:
        return torch.zeros((), dtype=theta.dtype, device=theta.device)
    ramp = torch.linspace(-1, 1, steps, dtype=theta.dtype, device=theta.device)
    # XLA turns x / broadcast(n) into x * broadcast(1 / n), a rounding CPU does not make: the
    # divisor is made an array of the ramp's shape (ramp * 0 is 0: the ramp is finite).
    return ramp if align_corners else ramp * (steps - 1) / (ramp * 0 + steps)


def _affine_grid_generator(theta, size, align_corners):
    torch._check(len(size) in (4, 5), lambda: "affine_grid_generator needs 4d (spatial) or "
                                             "5d (volumetric) inputs.")
    n, spatial = size[0], list(size[2:])
    # x along the last dim, then y, then z; then a column of ones
    ramps = [_linspace_from_neg_one(theta, steps, align_corners).reshape(-1, *([1] * k))
             for k, steps in enumerate(reversed(spatial))]
    ramps.append(theta.new_ones(()))
    base = torch.stack([r.expand(spatial) for r in ramps], -1).expand(n, *spatial, -1)
    grid = base.reshape(n, -1, len(spatial) + 1).bmm(theta.transpose(1, 2))
    return grid.view(n, *spatial, len(spatial))


DECOMPOSITIONS[aten.affine_grid_generator.default] = _affine_grid_generator


_block_diag_reference = DECOMPOSITIONS[aten.block_diag.default]


def _block_diag(tensors):
    """block_diag with ATen's checks and words (the reference's lack the op's name and say
    "Input tensors" where ATen says "input tensors" for devices)."""
    for i, t in enumerate(tensors):
        torch._check(t.dim() <= 2, lambda: "torch.block_diag: Input tensors must have 2 or "
                     f"fewer dimensions. Input {i} has {t.dim()} dimensions")  # noqa: B023
        torch._check(t.device == tensors[0].device, lambda: "torch.block_diag: input tensors "
                     f"must all be on the same device. Input 0 is on device {tensors[0].device}"
                     f" and input {i} is on device {t.device}")  # noqa: B023
    return _block_diag_reference(tensors)


DECOMPOSITIONS[aten.block_diag.default] = _block_diag


def _ldexp(self, other):
    """self * 2 ** other in the int-to-float result dtype of both, as CPU's ldexp. (PyTorch's
    decomposition raises a float32 2 for an integer self, so a 0-d half exponent gave float32
    where CPU gives half.)"""
    _, dtype = elementwise_dtypes(self, other, type_promotion_kind=_INT_TO_FLOAT)
    two = self.new_full((), 2.0, dtype=dtype)
    return self.to(dtype) * torch.pow(two, other.to(dtype))


DECOMPOSITIONS[aten.ldexp.Tensor] = _ldexp


# x << n is bitwise_left_shift on CPU, which shifts a bool tensor promoted by its shift (bools
# << 1 are int64); the meta kernel of __lshift__ refuses any bool tensor.
for _shift, _name in ((aten.__lshift__, "bitwise_left_shift"),
                      (aten.__rshift__, "bitwise_right_shift")):
    DECOMPOSITIONS[_shift.Tensor] = getattr(aten, _name).Tensor
    DECOMPOSITIONS[_shift.Scalar] = getattr(aten, _name).Tensor_Scalar
