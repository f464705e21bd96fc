"""Ops that cross the host/device boundary or touch tensor metadata, handled directly."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import torch
from torch._prims_common import compute_required_storage_length

from .. import sparse, sparse_compressed
from ..debug import counters as metrics
from ..ops.dtypes import broadcast, cast, cpp_name, scalar_type_name, to_jax_dtype
from ..runtime.platform import check_device_index
from ..runtime.transfer import to_device, to_host
from ..tensor import (
    TpuTensor,
    read,
    storage_byte_offset,
    whole_storage,
    with_layout,
    wrap,
    write,
)
from . import deferred_checks, mutation, views

aten = torch.ops.aten


def _value(x) -> "jnp.ndarray":
    if isinstance(x, TpuTensor):
        return read(x)
    metrics.count("transfer", "host_to_device")
    return to_device(x)


def _copy_(args, kwargs):
    dst, src = args[0], args[1]
    if not isinstance(dst, TpuTensor):
        # cpu_tensor.copy_(tpu_tensor): a device-to-host copy into the user's tensor.
        return dst.copy_(_to_host(src))
    mutation.refuse_self_overlap(dst)
    mutation.refuse_partial_overlap(dst, (src,))
    v = _value(src)
    want = to_jax_dtype(dst.dtype)
    if v.dtype != want:
        _warn_if_dropping_imaginary(src.dtype, dst.dtype)
        v = cast(v, want)
    if v.shape != tuple(dst.shape):
        # TensorIterator's errors, from the meta kernel: sizes that do not broadcast, or a
        # broadcast shape larger than the destination
        torch.empty(dst.shape, device="meta").copy_(torch.empty(v.shape, device="meta"))
        v = broadcast(v, tuple(dst.shape))
    write(dst, v)
    return dst


def _to_copy(args, kwargs):
    x = args[0]
    dtype = kwargs.get("dtype")
    device = kwargs.get("device")
    stride = _copy_layout(x, kwargs.get("memory_format"))
    if device is not None and torch.device(device).type == "meta":
        return torch.empty_strided(x.shape, stride, dtype=dtype or x.dtype, device="meta")
    if device is not None and torch.device(device).type == "cpu":
        out = _to_host(x)
        out = out if dtype is None else out.to(dtype)
        if out.stride() != stride:  # .cpu() keeps channels_last, as from cuda
            out = torch.empty_strided(out.shape, stride, dtype=out.dtype).copy_(out)
        return out
    check_device_index(device)
    v = read(x)
    if dtype is not None and to_jax_dtype(dtype) != v.dtype:
        _warn_if_dropping_imaginary(x.dtype, dtype)
        v = cast(v, to_jax_dtype(dtype))
    return with_layout(v, stride)


_warned_of_imaginary = False


def _warn_if_dropping_imaginary(src: torch.dtype, dst: torch.dtype) -> None:
    """CPU's warning, once per process as its TORCH_WARN_ONCE (a bool keeps nonzero-ness:
    none)."""
    global _warned_of_imaginary
    if src.is_complex and not dst.is_complex and dst != torch.bool and not _warned_of_imaginary:
        _warned_of_imaginary = True
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=2)


def _clone(args, kwargs):
    x = args[0]
    return with_layout(read(x), _copy_layout(x, kwargs.get("memory_format")))


def _copy_layout(x: TpuTensor, memory_format) -> tuple[int, ...]:
    if x._direct and memory_format in (None, torch.preserve_format, torch.contiguous_format):
        return x.stride()  # the common case, without asking the meta kernels
    return views.layout_for(x, memory_format)


def _local_scalar_dense(args, kwargs):
    return _to_host(args[0]).item()


def _to_host(x: TpuTensor) -> torch.Tensor:
    """``x``'s values in a new CPU tensor. A sync point: a compiled program's check that
    failed (an index out of range) raises here once its program has finished."""
    metrics.count("transfer", "device_to_host")
    out = to_host(read(x))
    deferred_checks.raise_failed(wait=False)
    return out


def _resize_(args, kwargs):
    self, size = args[0], tuple(args[1])
    fmt = kwargs.get("memory_format", args[2] if len(args) > 2 else None)
    if fmt is None and tuple(self.shape) == size:
        return self  # ATen's resize_impl_: the same sizes keep their strides
    # The meta kernel's resize_ counts elements as CPU's does, refusing an overflowing count
    # (a negative size included) before empty's byte count below can word it otherwise.
    torch.empty(0, device="meta").resize_(size)
    stride = torch.empty(size, device="meta", memory_format=fmt or torch.contiguous_format).stride()
    if tuple(self.shape) != size or self.stride() != stride:
        views.resize(self, size, stride)
    return self


def _resize_as_(args, kwargs):
    self, template = args[0], args[1]
    fmt = kwargs.get("memory_format", args[2] if len(args) > 2 else None)
    if fmt is None:
        return _resize_((self, template.shape), {})
    # preserve_format: the template's layout, as empty_like chooses it
    meta = torch.empty_strided(template.shape, template.stride(), device="meta")
    stride = torch.empty_like(meta, memory_format=fmt).stride()
    views.resize(self, template.shape, stride)
    return self


def _identity(args, kwargs):
    return args[0]


def _clone_fresh(args, kwargs):
    return wrap(read(args[0]))


def _set_source_tensor(args, kwargs):
    """``self.set_(src)``: self becomes another view of src's storage, with src's geometry."""
    self, src = args
    if self.dtype != src.dtype:
        raise RuntimeError(f"Could not set tensor of type {cpp_name(src.dtype)} to a tensor of "
                           f"type {cpp_name(self.dtype)}")
    with torch._C._DisableTorchDispatch():
        # the wrapper's own storage and geometry (generic TensorImpl bookkeeping)
        torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
            _CPU, self, src.untyped_storage(), src.storage_offset(), src.shape, src.stride())
    self._storage = src._storage
    self._bitcast = src._bitcast
    views.set_geometry(self, src.shape, src.stride(), src.storage_offset())
    return self


def _set_source_storage(args, kwargs):
    """``self.set_(storage[, offset, size, stride])``: self views a tpu tensor's storage (as
    ``storage.tolist()`` and ``storage[i]`` do), its bytes read as self's dtype."""
    self, storage, *geometry = args
    if not geometry and not kwargs:
        geometry = (0, (storage.nbytes() // self.element_size(),), (1,))
    else:
        geometry = list(geometry) + [kwargs[k] for k in ("storage_offset", "size", "stride")
                                     if k in kwargs]
        if len(geometry) == 2:
            geometry.append(torch._prims_common.make_contiguous_strides_for(geometry[1]))
    offset, size, stride = geometry
    needed = compute_required_storage_length(size, stride, offset) * self.element_size()
    if needed > storage.nbytes():
        # CPU's kernel grows the storage for every tensor viewing it; here that would leave
        # the other views' values stale. Refused before anything changes.
        raise RuntimeError(
            f"set_: sizes {list(size)}, strides {list(stride)} and storage offset {offset} "
            f"need {needed} bytes, more than the tpu storage's {storage.nbytes()}: growing a "
            "tpu storage through set_ is not supported (resize_ a tensor viewing it first)")
    if shift := storage_byte_offset(storage):
        # A slice of a tpu storage (storage[4:8]) is viewed through the storage it was cut
        # from (CPU's tensor views the slice's own storage object, at offset 0).
        if shift % self.element_size():
            raise RuntimeError(
                f"set_: a slice of a tpu storage starting at byte {shift} cannot be viewed as "
                f"{scalar_type_name(self.dtype)} ({self.element_size()} bytes an element)")
        storage, offset = whole_storage(storage), offset + shift // self.element_size()
    shared = getattr(storage, "_tpu_storage", None)  # set by TpuTensor.untyped_storage
    if shared is None and storage.device.type == "tpu":
        raise RuntimeError("set_: this tpu storage was not taken from a tpu tensor "
                           "(t.untyped_storage()), so it holds no values")
    with torch._C._DisableTorchDispatch():
        # PyTorch's checks (the devices match, the geometry fits) and the wrapper's geometry
        torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
            _CPU, self, storage, offset, size, stride)
    self._storage = shared
    dtype = to_jax_dtype(self.dtype)
    self._bitcast = None if dtype == self._storage.dtype else dtype
    views.set_geometry(self, size, stride, offset)
    return self


_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _is_set_to(args, kwargs):
    self, other = args
    return (self._storage is getattr(other, "_storage", None) and self.dtype == other.dtype
            and self.shape == other.shape and self.stride() == other.stride()
            and self.storage_offset() == other.storage_offset())


def _has_same_storage_numel(args, kwargs):
    # Forward-mode AD asks it of a tangent and its primal.
    self, other = args
    return _storage_numel(self) == _storage_numel(other)


def _storage_numel(t) -> int:
    """Elements of ``t``'s dtype its storage holds (a CPU tangent of a tpu primal too)."""
    nbytes = t._storage.nbytes if "_storage" in t.__dict__ else t.untyped_storage().nbytes()
    return nbytes // t.element_size()


def _is_pinned(args, kwargs):
    return False  # a device tensor is never pinned host memory (cuda's answer too)


def _sdp_choice(args, kwargs):
    # SDPBackend.MATH: attention decomposes into ops that all have rules.
    return 0


def _packed_rows(batch_sizes: list[int], batch: int) -> list[int]:
    """Rows of a (time, batch) flattened input a packed sequence holds, in packed order."""
    return [t * batch + b for t, size in enumerate(batch_sizes) for b in range(size)]


def _pack_padded_sequence(args, kwargs):
    # Lengths in and batch sizes out stay on the host, as on cuda: the packed RNN reads them.
    x, lengths, batch_first = args
    # ATen's order of checks, and its IndexError for an input of fewer than two dimensions
    # (from the transpose or from size(1)).
    if x.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    steps = x.transpose(0, 1) if batch_first else x
    if lengths.device.type != "cpu" or lengths.dim() != 1 or lengths.dtype != torch.int64:
        raise RuntimeError(
            "'lengths' argument should be a 1D CPU int64 tensor, but got "
            f"{lengths.dim()}D {lengths.device} {scalar_type_name(lengths.dtype)} tensor")
    batch = steps.size(1)
    time = steps.size(0)
    lens = lengths.tolist()
    if len(lens) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lens)} (batch_size={batch})")
    if lens and lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lens, lens[1:], strict=False)):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
            "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
            "to sidestep this requirement if you do not need ONNX exportability.")
    if lens and lens[0] > time:
        raise RuntimeError(f"pack_padded_sequence: a length of {lens[0]} is more than the "
                           f"input's {time} time steps")
    batch_sizes = [sum(n > t for n in lens) for t in range(lens[0] if lens else 0)]
    rows = torch.tensor(_packed_rows(batch_sizes, batch), device=x.device)
    data = steps.reshape(time * batch, *steps.shape[2:]).index_select(0, rows)
    return data, torch.tensor(batch_sizes, dtype=torch.int64)


def _pack_padded_sequence_backward(args, kwargs):
    grad, input_size, batch_sizes, batch_first = args
    time, batch = (input_size[1], input_size[0]) if batch_first else input_size[:2]
    rows = torch.tensor(_packed_rows(batch_sizes.tolist(), batch), device=grad.device)
    flat = grad.new_zeros((time * batch, *input_size[2:])).index_copy(0, rows, grad)
    steps = flat.reshape(time, batch, *input_size[2:])
    return steps.transpose(0, 1) if batch_first else steps


def _assert_tensor_metadata(args, kwargs):
    """torch.export's checks after a conversion: PyTorch's own, on a meta tensor of the same
    geometry (the device is compared here: meta is not tpu)."""
    a, *rest = args
    device = kwargs.get("device")
    if device is not None and torch.device(device) != a.device:
        raise RuntimeError(f"Tensor device mismatch! Expected: {device}, Got: {a.device}")
    aten._assert_tensor_metadata(views.meta_like(a), *rest,
                                 **{k: v for k, v in kwargs.items() if k != "device"})


NONZERO_EXPECTED = "Expected Tensor with single nonzero value, but got zero"  # (CPU's)


def _assert_async(args, kwargs):
    """``torch._assert_async(t[, message])``: CPU's check, made on the host (cuda asserts on
    the device; in fused eager, reading ``t`` is a sync point)."""
    t, *message = args
    if not bool(t):  # one element, or bool()'s own error
        raise RuntimeError(message[0] if message else NONZERO_EXPECTED)


def _functional_assert_async(args, kwargs):
    t, message, dep_token = (*args, *kwargs.values())
    _assert_async((t, message), {})
    return dep_token.clone()


def _range_of_tensor_ends(scalar_form):
    """linspace/logspace of 0-d tensor ends: ATen reads the ends (``item()``) and makes the
    range where ``device=`` says, the default device without it, never on the ends' device
    for being theirs (a tpu result had come back)."""
    name = scalar_form.overloadpacket.__name__

    def handler(args, kwargs):
        start, end, *rest = args
        dims = [x.dim() if isinstance(x, torch.Tensor) else 0 for x in (start, end)]
        if any(dims):
            raise RuntimeError(
                f"{name} only supports 0-dimensional start and end tensors, but got start with "
                f"{dims[0]} dimension(s) and end with {dims[1]} dimension(s).")
        start, end = (x.item() if isinstance(x, torch.Tensor) else x for x in (start, end))
        return scalar_form(start, end, *rest, **kwargs)

    return handler


HANDLERS = {
    aten._assert_async.default: _assert_async,
    aten._assert_async.msg: _assert_async,
    aten._functional_assert_async.msg: _functional_assert_async,
    aten._assert_tensor_metadata.default: _assert_tensor_metadata,
    aten._pack_padded_sequence.default: _pack_padded_sequence,
    aten._pack_padded_sequence_backward.default: _pack_padded_sequence_backward,
    aten._fused_sdp_choice.default: _sdp_choice,
    aten.copy_.default: _copy_,
    # XLA keeps a buffer while anything references it, and the device has one queue.
    aten.record_stream.default: lambda args, kwargs: None,
    aten._to_copy.default: _to_copy,
    aten.clone.default: _clone,
    aten._local_scalar_dense.default: _local_scalar_dense,
    aten.resize_.default: _resize_,
    aten.resize_as_.default: _resize_as_,
    aten.lift_fresh.default: _identity,
    # A tensor that is not quantized dequantizes as CPU's kernel does it: .to(float32), which is
    # the tensor itself when it is float32 (torchao's low-bit optimizer states answer
    # dequantize(), so code reading optimizer state calls it on plain tensors too).
    aten.dequantize.self: lambda args, kwargs: args[0].to(torch.float32),
    aten.lift_fresh_copy.default: _clone_fresh,
    aten.set_.source_Tensor: _set_source_tensor,
    aten.set_.source_Storage: _set_source_storage,
    aten.set_.source_Storage_storage_offset: _set_source_storage,
    aten.is_set_to.default: _is_set_to,
    aten.is_pinned.default: _is_pinned,
    aten._has_same_storage_numel.default: _has_same_storage_numel,
    # torch._refs.real / imag's view prims, whose meta kernel makes a copy: the aten views
    # alias their base with CPU's strides (a view without a rule would be gathered complex).
    torch.ops.prims.real.default: lambda args, kwargs: torch.real(*args, **kwargs),
    torch.ops.prims.imag.default: lambda args, kwargs: torch.imag(*args, **kwargs),
}
# The window factories' out= forms run CPU's own kernel: it builds the window in the out's
# dtype, through the factory (built on the host, backend.py) with its dtype check, and copies
# it over. (hann_window's decomposition computed a float16 window in float32 and took int64.)
_EXPLICIT = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


def explicit_kernel(func):
    """A handler running ``func``'s device-generic (CompositeExplicitAutograd) kernel."""
    return lambda args, kwargs: func.redispatch(_EXPLICIT, *args, **kwargs)


for _packet in (aten.hann_window, aten.hamming_window, aten.blackman_window,
                aten.bartlett_window, aten.kaiser_window):
    for _overload in _packet.overloads():
        if _overload.endswith("out"):
            HANDLERS[getattr(_packet, _overload)] = explicit_kernel(getattr(_packet, _overload))


def _linear_combination_out(args, kwargs):
    # CPU's kernel adds the combination into out (it reads out as an input), not over it
    input_, coefficients, out = (*args, *kwargs.values())
    return out.add_(aten._compute_linear_combination.default(input_, coefficients))


HANDLERS[aten._compute_linear_combination.out] = _linear_combination_out
for _packet in (aten.linspace, aten.logspace):
    for _overload in ("Tensor_Tensor", "Tensor_Scalar", "Scalar_Tensor"):
        HANDLERS[getattr(_packet, _overload)] = _range_of_tensor_ends(_packet.default)


def _strided_nested(args, kwargs):
    # PyTorch's composite kernels would wrap tpu buffers in a C++ nested tensor no op can run
    # on (strided nested ops are C++ kernels per device); an autograd node over one reads its
    # sizes through such an op and aborts the process.
    raise NotImplementedError(
        "torchtpu: tpu has no strided nested tensors (the default layout); build a jagged one: "
        "torch.nested.nested_tensor(..., layout=torch.jagged) or as_nested_tensor(..., "
        "layout=torch.jagged)")


def _sspaddmm_of_dense(args, kwargs):
    raise RuntimeError("tensor.sspaddmm(...) can only be called on sparse tensors")  # CPU's


# Sparse COO tensors made from tpu tensors (sparse.py).
HANDLERS.update({
    aten.sspaddmm.out: _sspaddmm_of_dense,  # (a sparse input's is in sparse_matmul.py)
    aten._sparse_coo_tensor_with_dims_and_tensors.default: sparse.construct,
    aten._validate_sparse_coo_tensor_args.default: sparse.validate,
    aten._to_sparse.default: sparse.to_sparse,
    aten._spdiags.default: sparse.spdiags,
    aten._to_sparse.sparse_dim: sparse.to_sparse,
    aten._to_sparse_csr.default: sparse_compressed.dense_handler(torch.sparse_csr),
    aten._to_sparse_csc.default: sparse_compressed.dense_handler(torch.sparse_csc),
})

for _op in (aten._nested_tensor_from_tensor_list.default, aten._nested_view_from_buffer.default,
            aten._nested_view_from_buffer_copy.default):
    HANDLERS[_op] = _strided_nested
