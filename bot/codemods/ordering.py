"""The order ruff's isort (rule ``I``, default settings) gives to names in one import.

``order-by-type``: CONSTANTS first, then CamelCase classes, then other names; within each
group case-insensitively, with digit runs compared as numbers (ruff uses natural order),
and the exact spelling as the tie-break.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence


def _is_cased_uppercase(name: str) -> bool:
    return any(c.isupper() for c in name) and not any(c.islower() for c in name)


def member_type(name: str) -> int:
    if len(name) > 1 and _is_cased_uppercase(name):
        return 0
    if name[:1].isupper():
        return 1
    return 2


def _digits_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return end


def natural_compare(left: str, right: str) -> int:
    i = j = 0
    while i < len(left) and j < len(right):
        a, b = left[i], right[j]
        if "0" <= a <= "9" and "0" <= b <= "9":
            i_end, j_end = _digits_end(left, i), _digits_end(right, j)
            a_num, b_num = int(left[i:i_end]), int(right[j:j_end])
            if a_num != b_num:
                return -1 if a_num < b_num else 1
            i, j = i_end, j_end
            continue
        if a != b:
            return -1 if a < b else 1
        i, j = i + 1, j + 1
    return (len(left) - i > 0) - (len(right) - j > 0)


def _compare_members(left: str, right: str) -> int:
    by_type = member_type(left) - member_type(right)
    if by_type:
        return by_type
    return natural_compare(left.lower(), right.lower()) or natural_compare(left, right)


member_sort_key = functools.cmp_to_key(_compare_members)


def is_sorted(names: Sequence[str]) -> bool:
    return all(_compare_members(a, b) <= 0 for a, b in zip(names, names[1:], strict=False))


def insertion_index(names: Sequence[str], name: str) -> int:
    """Where isort would put ``name`` among ``names``; the end if they are not in its order."""
    if not is_sorted(names):
        return len(names)
    for index, existing in enumerate(names):
        if _compare_members(name, existing) < 0:
            return index
    return len(names)


def module_sort_key(module: str) -> tuple[str, str]:
    return (module.lower(), module)
