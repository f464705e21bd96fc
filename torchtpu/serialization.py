"""torch.save / torch.load with tpu tensors.

A tpu tensor has no storage PyTorch can write: it pickles as its CPU copy plus its device
(``Tensor.__reduce_ex__``'s path for storage-less backends), which torch.load accepts with
``weights_only=True`` and moves wherever ``map_location`` says.

``map_location='tpu'`` asks PyTorch to build storages on the device, which a storage-less
backend cannot do (PyTorch's default would allocate one and crash). Storages stay on the
CPU instead, marked, and each tensor rebuilt from a marked storage is moved to the device as
it is rebuilt; tensors that shared a storage in the file share one device tensor (views of
it), as they would on cuda. TorchScript's save and load go through the CPU.

The legacy format (``_use_new_zipfile_serialization=False``) reads every storage's bytes only
after the whole pickle has been rebuilt: a tensor moved to the device while rebuilt is written
again once they are there (``_loading_legacy_files``).
"""

from __future__ import annotations

import copy
import functools
import threading
import warnings

import torch
import torch._weights_only_unpickler

from .tensor import TpuTensor, host_copies_shared, with_math_bits


def _tag(storage) -> str | None:
    return None  # our tensors never reach PyTorch's storage writer


_marked = [0]  # storages marked for tpu so far: a load that marked none has none to move


def _restore(storage, location: str):
    if not location.startswith("tpu"):
        return None
    storage._torchtpu_onto = location  # read by _rebuilt_onto_device
    _marked[0] += 1
    return storage


def _rebuilt_onto_device(rebuild):
    """PyTorch's rebuild of a tensor from a storage (and its offset, size, stride), moving
    the tensor to the device a storage restored for tpu was marked with."""

    @functools.wraps(rebuild)
    def rebuilt(storage, *args, **kwargs):
        t = rebuild(storage, *args, **kwargs)
        untyped = getattr(storage, "_untyped_storage", storage)
        device = getattr(untyped, "_torchtpu_onto", None)
        return t if device is None else _moved(t, untyped, device, t.requires_grad)

    return rebuilt


def _moved(t: torch.Tensor, storage, device: str, requires_grad: bool) -> torch.Tensor:
    # The first tensor of a storage moves whole (a plain device tensor when it spans the
    # storage, as a state_dict's do); the others are views of it, so tied weights stay tied.
    # The storage's bytes move, and a conj or neg bit is the view's (z and z.conj() share).
    conj, neg = t.is_conj(), t.is_neg()
    t = with_math_bits(t.detach(), conj, neg)  # (flipped: off)
    bases = storage.__dict__.setdefault("_torchtpu_bases", {})
    base = bases.get(t.dtype)
    spans = (t.storage_offset() == 0 and t.is_contiguous()
             and t.numel() * t.element_size() == storage.nbytes())
    if base is None and spans:
        moved = bases[t.dtype] = _to_device(t, device)
    else:
        if base is None:
            whole = torch.empty(0, dtype=t.dtype).set_(
                storage, 0, (storage.nbytes() // t.element_size(),), (1,))
            base = bases[t.dtype] = _to_device(whole, device)
        with torch.no_grad():
            moved = base.as_strided(t.shape, t.stride(), t.storage_offset())
    return with_math_bits(moved.detach(), conj, neg).requires_grad_(requires_grad)


def _loaded_with_storages_moved(load, *args, **kwargs):
    marked = _marked[0]
    loaded = load(*args, **kwargs)
    return loaded if _marked[0] == marked else _storages_moved(loaded)


def _storages_moved(loaded, seen=None):
    """The storages a load returned as themselves (``torch.save(t.untyped_storage())``, or in
    a dict or list), marked for tpu, as device storages: a tensor's storage where one was
    loaded from it (so they still share), else a copy of its bytes. Containers are changed in
    place; a tuple is rebuilt."""
    seen = {} if seen is None else seen
    if id(loaded) in seen:
        return seen[id(loaded)]
    seen[id(loaded)] = loaded
    if isinstance(loaded, (torch.UntypedStorage, torch.TypedStorage)):
        untyped = getattr(loaded, "_untyped_storage", loaded)
        device = getattr(untyped, "_torchtpu_onto", None)
        if device is None:
            return loaded
        bases = untyped.__dict__.setdefault("_torchtpu_bases", {})
        if not bases:
            host = torch.empty(0, dtype=torch.uint8).set_(untyped)
            bases[torch.uint8] = _to_device(host, device)
        moved = next(iter(bases.values())).untyped_storage()
        if isinstance(loaded, torch.TypedStorage):
            moved = torch.TypedStorage(wrap_storage=moved, dtype=loaded.dtype, _internal=True)
        seen[id(loaded)] = moved
        return moved
    if isinstance(loaded, dict):
        for k, v in loaded.items():
            loaded[k] = _storages_moved(v, seen)
    elif isinstance(loaded, list):
        loaded[:] = [_storages_moved(v, seen) for v in loaded]
    elif isinstance(loaded, tuple):
        items = [_storages_moved(v, seen) for v in loaded]
        if any(a is not b for a, b in zip(items, loaded, strict=True)):
            rebuilt = type(loaded)._make(items) if hasattr(loaded, "_make") else type(loaded)(items)
            seen[id(loaded)] = rebuilt
            return rebuilt
    return loaded


def _metadata_after_rebuild(rebuild_v2):
    """``_rebuild_tensor_v2``, which sets a tensor's saved conj and neg bits on the tensor
    rebuilt: one moved to tpu gets them as a view of its memory (the bits set on a tpu tensor
    as they are on a CPU one were not read: z.conj() loaded as z)."""

    @functools.wraps(rebuild_v2)
    def rebuilt(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                metadata=None):
        t = rebuild_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks)
        if not metadata:
            return t
        if not isinstance(t, TpuTensor):
            torch._utils.set_tensor_metadata(t, metadata)
            return t
        bits = with_math_bits(t.detach(), metadata.get("conj", False), metadata.get("neg", False))
        return bits.requires_grad_(requires_grad)

    return rebuilt


_legacy = threading.local()  # .unread: (device tensor, host tensor) pairs of a legacy load


def _to_device(host: torch.Tensor, device: str) -> torch.Tensor:
    moved = host.to(device)
    unread = getattr(_legacy, "unread", None)
    if unread is not None:  # its bytes are not read yet: written again once they are
        unread.append((moved, host))
    return moved


def _loading_legacy_files(legacy_load):
    """PyTorch's loader of the legacy format, which reads the storages' bytes after rebuilding
    every tensor (a cuda storage is made first and filled then): tensors moved to tpu while
    rebuilt are given their bytes once read. It also sets the ``map_location`` that the
    rebuild of a tensor saved from tpu reads, as the zipfile loader does (it was ignored)."""

    @functools.wraps(legacy_load)
    def loaded(f, map_location, *args, **kwargs):
        outer, _legacy.unread = getattr(_legacy, "unread", None), []
        unread = _legacy.unread
        torch.serialization._serialization_tls.map_location = map_location
        try:
            result = _loaded_with_storages_moved(legacy_load, f, map_location, *args, **kwargs)
        finally:
            _legacy.unread = outer
            torch.serialization._serialization_tls.map_location = None
        with torch.no_grad():
            for moved, host in unread:
                moved.copy_(host)
        return result

    loaded._torchtpu = True
    return loaded


_rebuild_location = torch._utils._get_restore_location


def _restore_location(device: str):
    """Where torch.load puts a tensor saved from tpu, with a callable ``map_location`` too.

    PyTorch refuses a callable for storage-less devices; cuda's idiom
    ``map_location=lambda storage, loc: storage`` (keep on the CPU) is common. The callable
    gets a CPU storage and the saved location, and where it returns that storage is where
    the tensor goes (None: where it was saved).
    """
    where = torch.serialization._serialization_tls.map_location
    if where is None or isinstance(where, (dict, str, torch.device)):
        return _rebuild_location(device)
    moved = where(torch.UntypedStorage(0), device)
    return device if moved is None else moved.device


def _names_tpu(device) -> bool:
    try:
        return isinstance(device, (str, torch.device)) and torch.device(device).type == "tpu"
    except RuntimeError:  # not a device name: safetensors says so
        return False


def _opening_for_tpu(safe_open):
    """safetensors' ``safe_open(path, framework, device=...)`` (and ``load_file``, which calls
    it): its device parser (Rust) knows cuda's names, not 'tpu'. The file is opened on the
    CPU and each tensor read is moved, as a cuda load is read there."""

    @functools.wraps(safe_open)
    def opening(filename, framework, device="cpu", **kwargs):
        if _names_tpu(device):
            return _OpenedForTpu(safe_open(filename, framework, "cpu", **kwargs), device)
        return safe_open(filename, framework, device, **kwargs)

    opening._torchtpu = True
    return opening


class _OpenedForTpu:
    """A file opened on the CPU whose tensors are moved to ``device`` as they are read."""

    def __init__(self, opened, device) -> None:
        self._opened, self._device = opened, device

    def __enter__(self):
        self._opened.__enter__()
        return self

    def __exit__(self, *exc):
        return self._opened.__exit__(*exc)

    def __getattr__(self, name):  # keys, metadata, offset_keys
        return getattr(self._opened, name)

    def get_tensor(self, name: str) -> torch.Tensor:
        return self._opened.get_tensor(name).to(self._device)

    def get_tensors(self) -> dict[str, torch.Tensor]:
        return {k: v.to(self._device) for k, v in self._opened.get_tensors().items()}

    def get_slice(self, name: str):
        return _SliceForTpu(self._opened.get_slice(name), self._device)


class _SliceForTpu:
    def __init__(self, part, device) -> None:
        self._slice, self._device = part, device

    def __getitem__(self, index) -> torch.Tensor:
        return self._slice[index].to(self._device)

    def __getattr__(self, name):  # get_shape, get_dtype
        return getattr(self._slice, name)


def _jit_load_onto_tpu(jit_load):
    """``torch.jit.load(f, map_location='tpu')``: TorchScript's C++ loader would build
    storages on the device, which a storage-less backend cannot hold (the tensors came back
    empty). It loads on the CPU and the module moves, as ``torch.load`` does."""

    @functools.wraps(jit_load)
    def load(f, map_location=None, *args, **kwargs):
        if _names_tpu(map_location):
            return jit_load(f, "cpu", *args, **kwargs).to(map_location)
        return jit_load(f, map_location, *args, **kwargs)

    load._torchtpu = True
    return load


def _jit_save_from_tpu(jit_save):
    """``torch.jit.save`` of a module holding tpu tensors: TorchScript's writer reads each
    storage's bytes, which a tpu tensor keeps on the device. A copy moved to the CPU is
    written; it loads on the CPU (``map_location='tpu'`` brings it back)."""

    @functools.wraps(jit_save)
    def save(m, f, *args, **kwargs):
        tensors = [*m.parameters(), *m.buffers()] if hasattr(m, "parameters") else []
        if any(t.device.type == "tpu" for t in tensors):
            m = copy.deepcopy(m).to("cpu")
        return jit_save(m, f, *args, **kwargs)

    save._torchtpu = True
    return save


def _saving_shared_storages(save):
    @functools.wraps(save)
    def saved(*args, **kwargs):
        with host_copies_shared():
            return save(*args, **kwargs)

    saved._torchtpu = True
    return saved


def _forgetting_map_location(load):
    """PyTorch sets the ``map_location`` its rebuilds read for the length of one load, and
    leaves it set when the load raises: a later ``pickle.loads`` of a tpu tensor (whose
    rebuild reads it) went where that failed load's ``map_location`` said."""

    @functools.wraps(load)
    def loaded(*args, **kwargs):
        try:
            return _loaded_with_storages_moved(load, *args, **kwargs)
        finally:
            torch.serialization._serialization_tls.map_location = None

    loaded._torchtpu = True
    return loaded


def _rebuilt_as_plain(rebuild_from_type):
    """``_rebuild_from_type_v2``, a tensor saved with Python attributes, for a plain tensor
    (its class torch.Tensor, or TpuTensor in older files): loaded onto the other device than
    it was saved on, PyTorch re-classed it with ``as_subclass``, an alias (a leaf came back
    as a non-leaf). It keeps the class it was rebuilt with, as CPU's and cuda's do."""

    @functools.wraps(rebuild_from_type)
    def rebuilt(func, new_type, args, state):
        if new_type is not torch.Tensor and new_type is not TpuTensor:
            return rebuild_from_type(func, new_type, args, state)
        ret = func(*args)
        plain = type(ret) is torch.Tensor or type(ret) is TpuTensor
        return rebuild_from_type(lambda: ret, type(ret) if plain else new_type, (), state)

    return rebuilt


def _rebuild_device_tensor(data, dtype, device, requires_grad):
    """A tensor saved from tpu (its CPU copy and device), moved as ``_moved`` moves, so
    tensors that shared a storage when saved share one again."""
    device = str(torch._utils._get_restore_location(device))
    if not device.startswith("tpu") or data.dtype != dtype or data.device.type == "tpu" \
            or data.layout is not torch.strided:
        # (on tpu already: map_location='tpu' moved it from its marked storage; a sparse
        # compressed tensor has no storage: its members move)
        return _rebuild_from_cpu(data, dtype, device, requires_grad)
    return _moved(data, data.untyped_storage(), device, requires_grad)


_rebuild_from_cpu = torch._utils._rebuild_device_tensor_from_cpu_tensor


def _reduce_for_another_process(t: torch.Tensor):
    """A tpu tensor sent to another process (``mp.spawn``'s arguments, a Queue): its bytes,
    by value. As a CPU copy it was shared through a file descriptor that was gone (the copy
    freed) by the time a spawned child opened it."""
    if t.requires_grad and not t.is_leaf:  # torch.multiprocessing's own refusal
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., "
            "putting it on the queue).")
    # Hogwild-style training (model.share_memory(), children stepping it) would run and
    # train nothing here: say so where cuda's tensors would be shared.
    warnings.warn(
        "a tpu tensor sent to another process arrives as a copy: in-place changes made there "
        "(add_, an optimizer step) are not seen by this process, as they would be for a CPU "
        "tensor in shared memory or a cuda tensor; send CPU tensors "
        "(t.cpu().share_memory_()) to share them", stacklevel=2)
    host = t.detach().cpu().resolve_conj().resolve_neg().contiguous()
    data = host.reshape(-1).view(torch.uint8).numpy().tobytes() if host.numel() else b""
    return _rebuild_in_another_process, (data, host.dtype, tuple(host.shape), str(t.device),
                                         t.requires_grad, getattr(t, "_is_param", False))


def _rebuild_in_another_process(data: bytes, dtype, shape, device, requires_grad, is_param):
    if data:
        host = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)
    else:
        host = torch.empty(shape, dtype=dtype)
    t = host.to(device)
    if is_param:
        return torch.nn.Parameter(t, requires_grad)
    return t.requires_grad_(requires_grad)


def install() -> None:
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(TpuTensor, _reduce_for_another_process)
    # Files from torchtpu versions that named TpuTensor as a tensor's class (with Python
    # attributes), which torch.load(weights_only=True) must accept.
    torch.serialization.add_safe_globals([TpuTensor])
    if not getattr(torch._utils._rebuild_tensor, "_torchtpu", False):
        # (_rebuild_tensor_v2 calls _rebuild_tensor; v3 builds its own)
        for name in ("_rebuild_tensor", "_rebuild_tensor_v3"):
            rebuild = _rebuilt_onto_device(getattr(torch._utils, name))
            rebuild._torchtpu = True
            setattr(torch._utils, name, rebuild)
        torch._utils._rebuild_device_tensor_from_cpu_tensor = functools.wraps(
            _rebuild_from_cpu)(_rebuild_device_tensor)
        torch._tensor._rebuild_from_type_v2 = _rebuilt_as_plain(
            torch._tensor._rebuild_from_type_v2)
        torch._utils._rebuild_tensor_v2 = _metadata_after_rebuild(torch._utils._rebuild_tensor_v2)
        torch._weights_only_unpickler._get_allowed_globals.cache_clear()
        torch.save = torch.serialization.save = _saving_shared_storages(torch.save)
        torch.serialization._load = _forgetting_map_location(torch.serialization._load)
        torch.serialization._legacy_load = _loading_legacy_files(
            torch.serialization._legacy_load)
    # Ahead of PyTorch's own privateuse1 restore (priority 20).
    torch.serialization.register_package(15, _tag, _restore)
    torch._utils._get_restore_location = _restore_location
    if not getattr(torch.jit.load, "_torchtpu", False):
        torch.jit.load = _jit_load_onto_tpu(torch.jit.load)
        torch.jit.save = _jit_save_from_tpu(torch.jit.save)
    try:
        import safetensors.torch
    except ImportError:
        return
    if not getattr(safetensors.safe_open, "_torchtpu", False):
        safetensors.safe_open = safetensors.torch.safe_open = _opening_for_tpu(
            safetensors.safe_open)
