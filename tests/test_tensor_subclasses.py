"""Users' tensor subclasses over tpu tensors (``as_subclass``, ``_make_subclass``, Parameter
subclasses): of the user's class, with its ``__torch_function__``, as on CPU; and what a
user put on a parameter survives ``module.to``."""

from __future__ import annotations

import copy
import io
import pickle

import torch
from conftest import TPU, assert_same


class Tagged(torch.Tensor):
    pass


class Logged(torch.Tensor):
    calls: list = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs)


class Scaled(torch.nn.Parameter):
    def __new__(cls, data, scale: float = 2.0):
        p = super().__new__(cls, data)
        p.scale = scale
        return p


def test_as_subclass_keeps_the_users_class_through_ops_and_autograd(eager_mode):
    def run(device):
        x = torch.arange(4.0, device=device, requires_grad=True)
        y = x.as_subclass(Tagged)
        z = (y * 3 + 1).sum(0, keepdim=True)
        z.backward()
        return type(y), type(z), y.device, z.detach(), x.grad

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[0].__name__ == tpu[1].__name__ == "Tagged"
    assert issubclass(tpu[1], Tagged) and tpu[2].type == "tpu"
    assert_same(tpu[3:], cpu[3:])


def test_a_users_torch_function_sees_every_call():
    def run(device):
        Logged.calls = []
        y = torch.ones(2, 2, device=device).as_subclass(Logged)
        out = torch.nn.functional.relu(y @ y).sum()
        return Logged.calls, out.item(), isinstance(out, Logged)

    assert run(TPU) == run("cpu")


def test_subclass_instances_move_between_devices_as_their_class():
    on_tpu = torch.arange(3.0).as_subclass(Tagged).to(TPU)
    assert isinstance(on_tpu, Tagged) and on_tpu.device.type == "tpu"
    back = on_tpu.cpu()
    assert type(back) is Tagged and back.tolist() == [0.0, 1.0, 2.0]
    written = on_tpu.as_subclass(Tagged)  # an alias: a write is seen by both
    written.add_(1)
    assert on_tpu.tolist() == [1.0, 2.0, 3.0]


def test_subclass_instances_print_pickle_and_copy_as_their_class():
    y = torch.arange(3.0, device=TPU).as_subclass(Tagged)
    y.note = "kept"
    assert repr(y) == "Tagged([0., 1., 2.], device='tpu:0')"
    buffer = io.BytesIO()
    torch.save(y, buffer)
    buffer.seek(0)
    for again in (pickle.loads(pickle.dumps(y)), torch.load(buffer, weights_only=False),
                  copy.deepcopy(y), copy.copy(y)):
        assert isinstance(again, Tagged) and again.device.type == "tpu"
        assert again.note == "kept" and again.tolist() == [0.0, 1.0, 2.0]


def test_make_subclass_of_tpu_data_is_a_detached_leaf():
    x = torch.ones(3, device=TPU, requires_grad=True) * 2
    p = torch.Tensor._make_subclass(Tagged, x, True)
    assert isinstance(p, Tagged) and p.is_leaf and p.requires_grad and p.grad_fn is None
    assert p.device.type == "tpu" and p.tolist() == [2.0, 2.0, 2.0]


class Kept(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # (the pattern of PyTorch's load_state_dict tests: detach keeps the class)
        with torch._C.DisableTorchFunctionSubclass():
            ret = func(*args, **(kwargs or {}))
        return cls(ret) if func is torch.Tensor.detach and not isinstance(ret, cls) else ret


def test_a_subclass_constructed_from_a_tpu_tensor_is_an_alias_of_its_class():
    # Sub(t) raised (PyTorch will not re-class the alias of a TpuTensor), and type(t)(data)
    # of a subclass on tpu made a plain tpu Parameter: nn.Parameter refused such classes.
    for device in ("cpu", TPU):
        x = torch.ones(3, device=device, requires_grad=True) * 2
        t = Tagged(x)
        assert type(t).__name__ == "Tagged" and isinstance(t, Tagged) and t.device == x.device
        assert t.grad_fn is not None and t.tolist() == [2.0, 2.0, 2.0]
        assert isinstance(torch.Tensor(x), torch.Tensor) and torch.Tensor(2, 3).device.type == "cpu"
        k = Kept(x.detach())
        assert isinstance(k.detach(), Kept) and type(k.detach()) is type(k)
        p = torch.nn.Parameter(k)
        assert isinstance(p, Kept) and p.requires_grad and p.device == x.device


def test_make_subclass_sets_requires_grad_unseen_by_the_classs_torch_function():
    # ExpandedWeight (per-sample gradients) refuses every function it does not handle,
    # requires_grad_ too: CPU's _make_subclass sets the flag in C++
    from torch.nn.utils._per_sample_grad import call_for_per_sample_grads

    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv1d(2, 3, 2), torch.nn.Flatten(),
                                    torch.nn.Linear(12, 2)).to(device)
        x = torch.arange(40.0).reshape(4, 2, 5).to(device)
        call_for_per_sample_grads(model)(x).sum().backward()
        return [p.grad_sample for p in model.parameters()]

    assert_same(run(TPU), run("cpu"), rtol=1e-5)


def test_parameter_subclasses_train_and_copy_as_on_cpu():
    def run(device):
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 2).to(device)
        m.bias = Scaled(torch.zeros(2, device=device), 3.0)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        m(torch.ones(4, 3, device=device)).square().sum().backward()
        opt.step()
        copied = copy.deepcopy(m)
        return ([n for n, _ in m.named_parameters()], type(m.bias).__name__, m.bias.scale,
                isinstance(copied.bias, Scaled), [p.detach() for p in m.parameters()])

    tpu, cpu = run(TPU), run("cpu")
    assert tpu[:4] == cpu[:4] == (["weight", "bias"], "Scaled", 3.0, True)
    assert_same(tpu[4], cpu[4])


def test_module_to_keeps_parameter_subclasses():
    m = torch.nn.Linear(3, 2)
    m.bias = Scaled(m.bias.detach(), 5.0)
    bias = m.bias
    m.to(TPU)
    assert m.bias is bias and isinstance(bias, Scaled) and bias.device.type == "tpu"
    assert bias.scale == 5.0
    m.to("cpu")
    assert type(m.bias) is Scaled and m.bias.device.type == "cpu"


def test_module_to_keeps_attributes_set_on_parameters():
    # (optimizer-group markers such as no_decay; cuda's .data swap keeps them)
    m = torch.nn.Linear(3, 2)
    m.weight.no_decay = True
    m.to(TPU)
    assert m.weight.no_decay is True and m.weight.device.type == "tpu"
    m.to("cpu")
    assert m.weight.no_decay is True


class Wrapped(torch.Tensor):
    """A wrapper subclass holding an inner tensor, unwrapped in its own dispatch (the pattern
    of functional collectives' AsyncCollectiveTensor, which tensor parallelism hands on)."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, dtype=inner.dtype, device=inner.device,
            requires_grad=inner.requires_grad)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.inner if isinstance(t, Wrapped) else t  # noqa: E731
        args, kwargs = torch.utils._pytree.tree_map(unwrap, (args, kwargs or {}))
        return func(*args, **kwargs)


def test_a_wrapper_subclass_beside_tpu_tensors_runs_its_own_dispatch(eager_mode):
    def run(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        w = Wrapped(torch.full((2, 3), 2.0, device=device))
        return [torch.add(x, w), torch.mul(w, x), torch.ops.aten.gelu_backward(x, w)]

    assert_same(run(TPU), run("cpu"))


class CopiesAttributes(torch.Tensor):
    """Puts its first argument's attributes onto each result, wholesale, as MONAI's
    MetaTensor does (its metadata: affine, applied transforms)."""

    replace = False

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        ret = super().__torch_function__(func, types, args, kwargs)
        source = args[0] if args and isinstance(args[0], cls) else None
        if isinstance(ret, cls) and source is not None and ret is not source:
            attrs = source.__dict__
            if cls.replace:
                ret.__dict__ = {k: attrs[k] for k in attrs.keys()}
            else:
                ret.__dict__.update({k: attrs[k] for k in attrs.keys()})
        return ret


def test_a_class_copying_attributes_between_tensors_copies_only_the_users():
    # Each op's result had its input's values: __dict__ held the tpu payload too.
    def run(device, replace):
        CopiesAttributes.replace = replace
        x = torch.arange(6.0, device=device).reshape(2, 3).as_subclass(CopiesAttributes)
        x.note = "affine"
        y = (x * 2 + 1)[None].sum(-1)
        return sorted(y.__dict__), y.note, y.shape, y.as_subclass(torch.Tensor)

    for replace in (False, True):
        tpu, cpu = run(TPU, replace), run("cpu", replace)
        assert tpu[:3] == cpu[:3]
        assert_same(tpu[3], cpu[3])


def test_load_state_dict_swaps_parameters_of_a_class_with_a_torch_function():
    # swap_module_params_on_conversion: torch.utils.swap_tensors refused such a tensor on tpu
    # ("Cannot swap t1 because it has weakref associated with it": our payload was kept in a
    # weak side table for classes that may replace __dict__ wholesale).
    def run(device, assign):
        with torch.device(device):
            m = torch.nn.Linear(2, 3, bias=False)
            m.weight = torch.nn.Parameter(Logged(m.weight))
            m.register_buffer("buf", Logged(torch.zeros(3)))
        m.load_state_dict({"weight": torch.arange(6.0).view(3, 2).to(device),
                           "buf": torch.ones(3, device=device)}, assign=assign)
        return (m.weight.as_subclass(torch.Tensor).detach(), m.buf.as_subclass(torch.Tensor),
                [isinstance(m.weight, torch.nn.Parameter), isinstance(m.weight, Logged),
                 isinstance(m.buf, Logged)])

    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        for assign in (False, True):
            tpu, cpu = run(TPU, assign), run("cpu", assign)
            assert tpu[2] == cpu[2] == [True, True, True]
            assert_same(tpu[:2], cpu[:2])
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
