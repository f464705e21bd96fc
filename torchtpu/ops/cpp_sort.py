"""``std::sort`` as libstdc++ runs it, step for step.

Where the comparison is not a strict weak order (rows compared lexicographically with ``<``
and ``>``, a NaN neither), the result depends on the algorithm: CPU's unique(dim=) sorts so,
and its order is part of its result.
"""

from __future__ import annotations

from collections.abc import Callable

_THRESHOLD = 16  # libstdc++'s _S_threshold: runs this short are left to insertion sort

Less = Callable[[int, int], bool]


def std_sort(items: list, less: Less) -> list:
    """``items`` sorted in place by ``less`` as libstdc++'s introsort does, and returned."""
    n = len(items)
    if n > 1:
        _introsort_loop(items, 0, n, 2 * (n.bit_length() - 1), less)
        _final_insertion_sort(items, 0, n, less)
    return items


def _introsort_loop(v: list, first: int, last: int, depth: int, less: Less) -> None:
    while last - first > _THRESHOLD:
        if depth == 0:
            _heap_sort(v, first, last, less)
            return
        depth -= 1
        cut = _partition_pivot(v, first, last, less)
        _introsort_loop(v, cut, last, depth, less)
        last = cut


def _partition_pivot(v: list, first: int, last: int, less: Less) -> int:
    mid = first + (last - first) // 2
    a, b, c = first + 1, mid, last - 1
    if less(v[a], v[b]):
        median = b if less(v[b], v[c]) else c if less(v[a], v[c]) else a
    else:
        median = a if less(v[a], v[c]) else c if less(v[b], v[c]) else b
    v[first], v[median] = v[median], v[first]
    lo, hi, pivot = first + 1, last, v[first]
    while True:
        # (unguarded in C++: a comparison that is no order may run off the range there; here
        # the bounds stop it)
        while lo < last - 1 and less(v[lo], pivot):
            lo += 1
        hi -= 1
        while hi > first and less(pivot, v[hi]):
            hi -= 1
        if not lo < hi:
            return lo
        v[lo], v[hi] = v[hi], v[lo]
        lo += 1


def _final_insertion_sort(v: list, first: int, last: int, less: Less) -> None:
    if last - first > _THRESHOLD:
        _insertion_sort(v, first, first + _THRESHOLD, less)
        for i in range(first + _THRESHOLD, last):
            _linear_insert(v, i, first, less)
    else:
        _insertion_sort(v, first, last, less)


def _insertion_sort(v: list, first: int, last: int, less: Less) -> None:
    for i in range(first + 1, last):
        if less(v[i], v[first]):
            v[first:i + 1] = [v[i], *v[first:i]]
        else:
            _linear_insert(v, i, first, less)


def _linear_insert(v: list, i: int, first: int, less: Less) -> None:
    value = v[i]
    while i > first and less(value, v[i - 1]):
        v[i] = v[i - 1]
        i -= 1
    v[i] = value


def _heap_sort(v: list, first: int, last: int, less: Less) -> None:
    """std::make_heap then std::sort_heap (introsort's fallback past its depth limit)."""
    n = last - first
    for parent in range((n - 2) // 2, -1, -1):
        _adjust_heap(v, first, parent, n, v[first + parent], less)
    while n > 1:
        n -= 1
        value, v[first + n] = v[first + n], v[first]
        _adjust_heap(v, first, 0, n, value, less)


def _adjust_heap(v: list, first: int, hole: int, n: int, value, less: Less) -> None:
    top, child = hole, hole
    while child < (n - 1) // 2:
        child = 2 * (child + 1)
        if less(v[first + child], v[first + child - 1]):
            child -= 1
        v[first + hole] = v[first + child]
        hole = child
    if n % 2 == 0 and child == (n - 2) // 2:
        child = 2 * (child + 1)
        v[first + hole] = v[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(v[first + parent], value):
        v[first + hole] = v[first + parent]
        hole, parent = parent, (parent - 1) // 2
    v[first + hole] = value
