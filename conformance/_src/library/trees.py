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


def spread(prefix: Any, tree: Any, *, name: str, is_leaf: Callable[[Any], bool]) -> list[tuple[str, Any]]:
    """``prefix`` (a pytree whose leaves, by ``is_leaf``, each stand for a whole subtree of ``tree``)
    given out to ``tree``'s leaves: one ``(label, value)`` per leaf of ``tree``, in
    ``jax.tree_util``'s order, the label naming where in ``prefix`` the value came from
    (``rtol['y']``).  A dict in ``prefix`` may leave keys of ``tree``'s dict out: they get None.
    A ``prefix`` that is no prefix of ``tree``'s structure is a ``TypeError`` naming ``name``."""

    def filled(p: Any, t: Any) -> Any:
        if isinstance(p, dict) and isinstance(t, dict) and not is_leaf(p):
            unknown = [k for k in p if k not in t]
            if unknown:
                raise TypeError(
                    f"{name} names {unknown[0]!r}, which the expected value lacks "
                    f"(its keys: {sorted(t, key=str)})"
                )
            return {k: filled(p.get(k), t[k]) for k in t}
        if isinstance(p, (list, tuple)) and isinstance(t, (list, tuple)) and len(p) == len(t):
            items = [filled(a, b) for a, b in zip(p, t, strict=True)]
            return type(p)(*items) if hasattr(p, "_fields") else type(p)(items)
        return p

    full = filled(prefix, tree)
    leaves, treedef = tree_flatten_with_path(full, is_leaf=lambda v: v is None or is_leaf(v))
    try:
        subtrees = treedef.flatten_up_to(tree)  # type: ignore[attr-defined]  # JAX's stubs lack it
    except (ValueError, TypeError) as exc:
        raise TypeError(
            f"{name} must be one value for every leaf, or a pytree of values with the structure of the "
            f"expected value (or a prefix of it): {exc}"
        ) from None
    given = []
    for (path, value), subtree in zip(leaves, subtrees, strict=True):
        label = name + keystr(path)
        count = len(jax.tree_util.tree_leaves(subtree))
        given += [(label, value)] * count
    return given
