"""CPU's checks of reductions' arguments: their dims, their range, their input."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..ops.reduction import check_nonempty


def arg_reduction_check(name: str):
    def check(self, dim=None, *_):
        if str(self.dtype) == "bool":
            return f"{name}(): does not support bool input"
        if dim is None and self.size == 0:
            return IndexError(f"{name}(): Expected reduction dim to be specified for "
                              "input.numel() == 0.")
        if dim is not None:
            check_nonempty(name, self, dim)
        return dims_limit(self, dim)

    return check


def nonempty_check(name: str):
    """max()/min() of nothing, or over an empty dim: CPU's messages (a JAX one otherwise),
    as amax/amin's rules raise them."""
    return lambda self, dim=None, *_: dims_limit(self, dim) or check_nonempty(name, self, dim)


def histc_range(self, bins=100, min=0, max=0) -> str | None:  # noqa: A002
    # CPU's order: the bins (in histogram's words), the range's finiteness, then its order (a
    # range from the data is checked on its values: bounds.py)
    if bins <= 0:
        return f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0"
    if min == max:
        return None
    return histc_range_error(min, max) or (
        "torch.histc: max must be larger than min" if min > max else None)


def histc_range_error(low: float, high: float) -> str | None:
    """CPU's histc refuses a range that is not finite."""
    if math.isfinite(low) and math.isfinite(high):
        return None
    return f"torch.histc: range of [{_cpp_float(low)}, {_cpp_float(high)}] is not finite"


def repeated_dim(ndim: int, args: Sequence) -> str | None:
    """CPU's words for the first dim a reduction's dim list names twice."""
    for dims in (a for a in args if isinstance(a, (list, tuple))):
        seen = set()
        for d in dims:
            if not isinstance(d, int):
                break
            d = d % max(ndim, 1)
            if d in seen:
                return f"dim {d} appears multiple times in the list of dims"
            seen.add(d)
    return None


def _cpp_float(x: float) -> str:
    """A double as C++'s ostream prints it."""
    return ("-nan" if math.copysign(1, x) < 0 else "nan") if math.isnan(x) else f"{x:g}"


def dims_limit(self, dim) -> str | None:
    # TensorIterator's reductions over a dim take up to 64 dims (c10's MAX_DIMS)
    if dim is not None and len(self.shape) > 64:
        return "only tensors with up to 64 dims are supported"
    return None
