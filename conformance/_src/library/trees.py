"""Pytrees for the assertions: leaves named by their paths, and what tells two structures apart.

A leaf's path is written as ``jax.tree_util.keystr`` writes it (``['w'][0]``,
``.bias``), after the name of the whole (``result['w'][0]``); the root of a
single leaf has the empty path, so a single array is named as before
(``result``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.tree_util import keystr, tree_flatten_with_path

# What is judged as one array, without walking a tree (the common case, kept cheap).
ARRAYS = (np.ndarray, np.generic, jax.Array)


def is_array(value: Any) -> bool:
    return isinstance(value, ARRAYS)


def named_leaves(
    tree: Any, is_leaf: Callable[[Any], bool] | None = None
) -> tuple[list[tuple[str, Any]], Any]:
    """The leaves of ``tree`` with their paths (``keystr``), in ``jax.tree_util``'s order, and the
    tree's structure."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf=is_leaf)
    return [(keystr(path), leaf) for path, leaf in pairs], treedef


def describe(tree: Any, treedef: Any) -> str:
    """A structure as a person reads it: the treedef and what the root is."""
    if treedef.num_leaves == 1 and treedef.num_nodes == 1:
        return f"a single leaf ({type(tree).__module__}.{type(tree).__qualname__}): {treedef}"
    count = treedef.num_leaves
    return f"a {type(tree).__qualname__} of {count} lea{'f' if count == 1 else 'ves'}: {treedef}"


def difference(name: str, got: list[str], want: list[str], what: str) -> str:
    """Which leaf paths one structure has and the other lacks, for a structure failure's hint."""
    missing = [p for p in want if p not in set(got)]
    extra = [p for p in got if p not in set(want)]

    def listed(paths: list[str]) -> str:
        shown = ", ".join(f"{what}{p}" for p in paths[:4])
        return shown + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")

    if want == [""] or got == [""]:
        one, many = (name, f"the {what}") if want == [""] else (f"the {what}", name)
        return (
            f"{one} is a single leaf and {many} a tree of {len(got) if want == [''] else len(want)}: "
            "compare leaf by leaf (a stacked array is not a tuple of arrays)"
        )
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{name} has {listed(missing)}, which the {what} lacks")
        if extra:
            parts.append(f"the {what} has {listed(extra)}, which {name} lacks")
        return "; ".join(parts)
    return (
        "the same leaf paths in other containers (a tuple for a list, a dict for another mapping, a "
        "namedtuple for a tuple): return the structure asked for"
    )
