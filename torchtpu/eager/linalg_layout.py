"""The strides CPU's LAPACK-backed linalg kernels give an out= they resize.

LAPACK reads and writes column-major matrices, so these kernels resize their matrix outs to
batched column-major ("Fortran") strides (ATen's ``batched_matrix_contiguous_strides`` with
``f_contig``): ``torch.linalg.inv(a, out=torch.empty(0))`` of a (2, 4, 4) ``a`` leaves the out
with strides (16, 1, 4). Their other outs (pivots, infos, eigenvalues, singular values), and
the kernels that compute in row-major order, resize contiguous as every out does. Found by
probing CPU; an out that already has its result's shape keeps its own strides.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..tensor import contiguous_strides


def fortran_strides(shape) -> tuple[int, ...]:
    """Batched column-major strides of ``shape`` (contiguous below two dimensions)."""
    strides = list(contiguous_strides(tuple(shape)))
    if len(shape) >= 2:
        strides[-1], strides[-2] = max(shape[-2], 1), 1
    return tuple(strides)


def _always(args, kwargs, shape) -> tuple[int, ...]:
    return fortran_strides(shape)


def _when_left(args, kwargs, shape) -> tuple[int, ...] | None:
    """left=False solves the transposed system: its result is row-major."""
    return fortran_strides(shape) if kwargs.get("left", True) else None


def _lstsq_solution(args, kwargs, shape) -> tuple[int, ...]:
    """lstsq solves in a column-major buffer of max(m, n) rows and narrows it to the n rows
    of the solution (squeezing a vector right-hand side's column)."""
    a, b = args[0], args[1]
    rows = max(a.shape[-2], a.shape[-1])
    if b.dim() == a.dim() - 1:
        return fortran_strides((*shape[:-1], rows, 1))[:-1]
    return fortran_strides((*shape[:-2], rows, shape[-1]))


# Per op (schema name): its out arguments CPU resizes column-major, each with a function
# (args, kwargs, shape) -> the strides (None: contiguous).
_COLUMN_MAJOR: dict[str, dict[str, Callable]] = {
    "aten::linalg_inv_ex": {"inverse": _always},
    "aten::linalg_cholesky_ex": {"L": _always},
    "aten::cholesky_inverse": {"out": _always},
    "aten::linalg_lu_factor_ex": {"LU": _always},
    "aten::linalg_lu_solve": {"out": _when_left},
    "aten::_linalg_solve_ex": {"result": _when_left, "LU": _always},
    "aten::linalg_solve_triangular": {"out": _always},
    "aten::triangular_solve": {"X": _always, "M": _always},
    "aten::linalg_qr": {"Q": _always, "R": _always},
    "aten::geqrf": {"a": _always},
    "aten::linalg_householder_product": {"out": _always},
    "aten::ormqr": {"out": _always},
    "aten::linalg_eig": {"eigenvectors": _always},
    "aten::_linalg_eigh": {"eigenvectors": _always},
    "aten::_linalg_svd": {"U": _always, "Vh": _always},
    "aten::linalg_ldl_factor_ex": {"LD": _always},
    "aten::linalg_ldl_solve": {"out": _always},
    "aten::linalg_lstsq": {"solution": _lstsq_solution},
}


# Kernels that skip their copy-aside only for an out with elements and the wrong layout: an
# empty out of the result's shape is written in place, so laid out column-major as well.
_RESTRIDES_EMPTY = frozenset({"aten::ormqr", "aten::linalg_householder_product",
                              "aten::cholesky_inverse", "aten::triangular_solve"})


def restrides_empty(func) -> bool:
    """Whether ``func``'s out= kernel lays out an empty out of the right shape too."""
    return func._schema.name in _RESTRIDES_EMPTY


def out_layout(func, out_names: list[str]):
    """For an out= op CPU resizes some outs column-major: a function (args, kwargs, shapes)
    -> the strides to resize each out to (None: contiguous); else None."""
    table = _COLUMN_MAJOR.get(func._schema.name)
    if table is None:
        return None
    rules = [table.get(name) for name in out_names]

    def strides(args, kwargs, shapes) -> list:
        return [rule and rule(args, kwargs, shape)
                for rule, shape in zip(rules, shapes, strict=True)]

    return strides


def _out_form(func):
    """linalg_eig.default -> linalg_eig.out (the out= overload taking the same arguments)."""
    packet = getattr(torch.ops.aten, func._schema.name.split("::")[1])
    names = [a.name for a in func._schema.arguments]
    for overload in packet.overloads():
        form = getattr(packet, overload)
        ins = [a.name for a in form._schema.arguments if not a.kwarg_only or a.name in names]
        if form is not func and ins == names and len(form._schema.arguments) > len(names):
            return form
    return None


def result_layout(func):
    """For a LAPACK op CPU lays out as its out= form resizes its outs: a function (args,
    kwargs, results) giving meta tensors with CPU's strides for its results (the meta kernels
    give eig's eigenvectors and svd's Vh row-major; geqrf and lstsq have none); else None."""
    form = _out_form(func) if func._schema.name in _COLUMN_MAJOR else None
    if form is None:
        return None
    strides_of = out_layout(form, [a.name for a in form._schema.arguments
                                   if a.kwarg_only and a.alias_info and a.alias_info.is_write])

    def laid_out(args, kwargs, results):
        single = isinstance(results, torch.Tensor)
        results = (results,) if single else tuple(results)
        shapes = [tuple(r.shape) for r in results]
        metas = tuple(
            torch.empty_strided(shape, stride or contiguous_strides(shape), dtype=r.dtype,
                                device="meta")
            for r, shape, stride in zip(results, shapes, strides_of(args, kwargs, shapes),
                                        strict=True))
        return metas[0] if single else metas

    return laid_out
