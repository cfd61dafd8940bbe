"""The bodies of the public assertions (``conformance.assertions``: read its docstring).

Each public assertion takes pytrees: the structures must match (kind
"structure"), and each leaf is judged by the single-array form, named by its
path.  A single array skips the tree walk.  The kit's own checks call the
single-array forms of the layout assertions (``assert_array_layout``,
``assert_array_shards``), which refuse anything but a ``jax.Array``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeAlias

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, Sharding

from conformance._src import internals
from conformance._src.library import diagnosis, jit_probe, show, tolerance, trees, values

DEFAULT_TOLERANCES = tolerance.DEFAULT_TOLERANCES

# A pytree (nested tuples, lists, dicts, registered nodes) of arrays, or of layouts.
PyTree: TypeAlias = Any
# Where a layout is asked: a Sharding, or a PartitionSpec taken on the context's mesh.
Layout: TypeAlias = Sharding | PartitionSpec

KINDS = (
    "dtype",  # assert_values_equal, assert_values_close
    "shape",
    "values",
    "close",
    "structure",  # any assertion given pytrees
    "not-an-array",  # assert_layout, assert_shards
    "memory-kind",
    "layout",
    "shards",
    "replicas",  # assert_replicas_agree
    "outputs",  # assert_jit_shardings
    "not-jit",
    "computed-before-jit",
    "jit-shardings",
    "recompiled",  # assert_compiles_once, assert_compiles_at_most
    "donated",
    "deleted",  # assert_input_intact
    "changed",
)


class AssertionFailed(AssertionError):
    """A failed assertion: ``summary``, ``expected``, ``got`` and a ``hint``, each also an attribute,
    and ``kind``, what failed, one of ``KINDS`` (stable: for code that reacts to a failure)::

        try:
            assert_values_equal(y, expected)
        except AssertionFailed as failure:
            if failure.kind != "values":
                raise
    """

    # Tracebacks name it where users import it from, not this private room.
    __module__ = "conformance.assertions"

    def __init__(
        self,
        kind: str,
        summary: str,
        *,
        expected: str,
        got: str,
        hint: str | None = None,
        whole: tuple[str, str] | None = None,
    ) -> None:
        assert kind in KINDS, kind
        self.kind, self.summary, self.expected, self.got, self.hint = kind, summary, expected, got, hint
        # A small leaf printed whole, (got, expected), as numpy.testing prints them; else None.
        self.whole = whole
        lines = [summary, f"  expected: {expected}", f"  got:      {got}"]
        if hint:
            lines.append(f"  hint:     {hint}")
        if whole is not None:
            for name, text in (("got (whole)", whole[0]), ("expected (whole)", whole[1])):
                lines.append(f"  {name}:".ljust(21) + text.replace("\n", "\n" + " " * 21))
        super().__init__("\n".join(lines))


def _where(index: tuple[int, ...]) -> str:
    """An element's index as written after the array's name; nothing for a 0-d array's one element."""
    return "[" + ", ".join(map(str, index)) + "]" if index else ""


def flush_subnormals(x: Any) -> np.ndarray:
    """``x`` with every subnormal float (or complex component) made a zero of the same sign, as
    XLA on CPU treats its inputs; other dtypes come back unchanged.  For the expected value of
    an input that may be subnormal::

        assert_values_equal(y, 2 * x, alternatives=[2 * flush_subnormals(x)])
    """
    return values.flush_subnormals(x)


def host_copy(array: Any, fill: np.ndarray | None = None) -> np.ndarray:
    """``array`` on the host.  In multi-process runs a process holds only some shards: the rest
    is taken from ``fill`` (what they should hold; the process holding them judges them) where
    it has the array's shape, else they are zeros.

    >>> host_copy(jax.device_put(np.arange(4), sharding))  # doctest: +SKIP
    array([0, 1, 2, 3])
    """
    if isinstance(array, jax.Array) and array.size == 0:
        # Nothing to read (and JAX 0.10 cannot copy some empty sharded arrays to the host).
        return np.zeros(array.shape, array.dtype)
    if not isinstance(array, jax.Array) or array.is_fully_addressable:
        return np.asarray(array)
    if fill is None or np.shape(fill) != array.shape:
        return np.zeros(array.shape, array.dtype)
    out = np.array(fill, dtype=array.dtype)
    for shard in array.addressable_shards:
        out[shard.index] = np.asarray(shard.data)
    return out


# ---------------------------------------------------------------------------
# Pytrees


def _structure_failure(
    got: Any,
    got_def: Any,
    got_paths: list[str],
    want: Any,
    want_def: Any,
    want_paths: list[str],
    *,
    name: str,
    what: str,
) -> AssertionFailed:
    return AssertionFailed(
        "structure",
        f"the {what} does not have the structure of {name}",
        expected=trees.describe(want, want_def),
        got=trees.describe(got, got_def),
        hint=trees.difference(name, got_paths, want_paths, what),
    )


def _judge_each(checks: list[tuple[str, Callable[[], None]]]) -> None:
    """Run each leaf's check; raise the first failure, saying which other leaves fail too."""
    __tracebackhide__ = True
    failed: list[tuple[str, AssertionFailed]] = []
    for label, check in checks:
        try:
            check()
        except AssertionFailed as failure:
            failure.__traceback__ = None
            failed.append((label, failure))
    if not failed:
        return
    first = failed[0][1]
    if len(failed) == 1:
        raise first
    others = [label for label, _ in failed[1:]]
    named = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    raise AssertionFailed(
        first.kind,
        f"{first.summary} (and {len(others)} more {'leaf fails' if len(others) == 1 else 'leaves fail'}: "
        f"{named})",
        expected=first.expected,
        got=first.got,
        hint=first.hint,
        whole=first.whole,
    )


def _pairs(got: Any, expected: Any, *, name: str, what: str) -> tuple[list[tuple[str, Any, Any]], Any]:
    """(label, got leaf, expected leaf) for two pytrees of one structure, and that structure."""
    __tracebackhide__ = True
    got_leaves, got_def = trees.named_leaves(got)
    want_leaves, want_def = trees.named_leaves(expected)
    if got_def != want_def:
        raise _structure_failure(
            got,
            got_def,
            [p for p, _ in got_leaves],
            expected,
            want_def,
            [p for p, _ in want_leaves],
            name=name,
            what=what,
        )
    pairs = [(what + path, g, w) for (path, g), (_, w) in zip(got_leaves, want_leaves, strict=True)]
    return pairs, want_def


# ---------------------------------------------------------------------------
# Values


# A tolerance as given: a number for every element, an array that broadcasts against the leaf,
# None (the dtype's default), or a pytree of those with the expected value's structure (or a
# prefix of it; a dict may leave keys out: they get the default).
Tolerance: TypeAlias = Any


@dataclass(frozen=True)
class _Tolerance:
    """One leaf's tolerance: None for the leaf's dtype default, a float, or an array broadcasting
    against the leaf; and where each came from (``rtol['y']``), for the message."""

    rtol: float | np.ndarray | None
    atol: float | np.ndarray | None
    rtol_from: str = "rtol"
    atol_from: str = "atol"

    def resolve(self, dtype: np.dtype) -> tuple[tolerance.Bound, tolerance.Bound, str]:
        """rtol, atol, and where they come from (for the message)."""
        default = tolerance.default_tolerance(dtype)
        if default is None and (self.rtol is None or self.atol is None):
            raise TypeError(
                f"dtype {dtype} has no default tolerance (DEFAULT_TOLERANCES): pass rtol= and atol="
            )
        rtol = default if self.rtol is None else self.rtol
        atol = default if self.atol is None else self.atol
        assert rtol is not None and atol is not None
        defaults = [n for n, v in (("rtol", self.rtol), ("atol", self.atol)) if v is None]
        parts = (
            [f"{dtype}'s defaults"] if len(defaults) == 2 else [f"{n}: {dtype}'s default" for n in defaults]
        )
        parts += [
            f"{name} from {source}"
            for name, value, source in (
                ("rtol", self.rtol, self.rtol_from),
                ("atol", self.atol, self.atol_from),
            )
            if value is not None and source != name
        ]
        return rtol, atol, "; ".join(parts) or "as given"


def _leaf_rules(
    rtol: Tolerance, atol: Tolerance, expected: Any, *, missing: float | None
) -> list[_Tolerance | None]:
    """One ``_Tolerance`` per leaf of ``expected`` (pytree order): ``rtol`` and ``atol`` given out
    by ``trees.spread``, each checked against its leaf's shape (a ``TypeError`` naming it); a
    value left out is ``missing``.  With ``missing`` 0 (``assert_values_equal``) a leaf whose
    tolerances are both 0 gets None: bit for bit."""
    leaves = jax.tree_util.tree_leaves(expected)
    spread = {
        name: trees.spread(value, expected, name=name, is_leaf=tolerance.is_bound_leaf)
        for name, value in (("rtol", rtol), ("atol", atol))
    }
    rules: list[_Tolerance | None] = []
    for leaf, (r_from, r), (a_from, a) in zip(leaves, spread["rtol"], spread["atol"], strict=True):
        shape = tuple(np.shape(leaf))
        r_, a_ = (tolerance.checked_bound(n, v, shape) for n, v in ((r_from, r), (a_from, a)))
        rule = _Tolerance(missing if r_ is None else r_, missing if a_ is None else a_, r_from, a_from)
        exact = missing == 0 and all(isinstance(v, float) and v == 0 for v in (rule.rtol, rule.atol))
        rules.append(None if exact else rule)
    return rules


def assert_values_equal(
    got: PyTree,
    expected: PyTree,
    *,
    rtol: Tolerance = 0.0,
    atol: Tolerance = 0.0,
    alternatives: Sequence[PyTree] = (),
    flush: bool = True,
    what: str = "result",
) -> None:
    """``got`` has ``expected``'s dtype, shape and values, bit for bit.

    Any NaN matches any NaN (payloads and signs of NaN are free); zeros keep
    their sign.  With ``flush`` (the default) a zero of the same sign also
    matches a subnormal ``expected`` value: XLA on CPU flushes subnormal
    inputs and results to zero.  Where an *input* may be subnormal, compute
    the expected value from the flushed input too and pass it in
    ``alternatives``; each element must match ``expected`` or one of them::

        assert_values_equal(y, 2 * x, alternatives=[2 * flush_subnormals(x)])

    Complex numbers match when both components match the same candidate.
    Works on every dtype: integers and booleans compare exactly.  Given an
    ``rtol`` or ``atol`` other than 0 it is ``assert_values_close`` with them
    (in the forms ``assert_values_close`` takes; a leaf they leave out is
    compared bit for bit).

    ``got`` and ``expected`` may be pytrees of one structure (a tuple is not
    a stacked array); each leaf is judged and a failure names its path
    (``result['w'][0]``); each alternative then has that structure too::

        assert_values_equal(params, {"w": (w0, w1), "b": b})

    A failure says which shards of ``got`` hold the wrong elements and which
    hold right ones, and the pattern they make (all scaled by a mesh axis's
    size, offset, zero, on shard edges); a leaf of at most 100 elements is
    printed whole, both arrays.
    """
    __tracebackhide__ = True
    _compare(got, expected, alternatives, rtol, atol, flush, what, missing=0.0)


def assert_values_close(
    got: PyTree,
    expected: PyTree,
    *,
    rtol: Tolerance = None,
    atol: Tolerance = None,
    alternatives: Sequence[PyTree] = (),
    flush: bool = True,
    what: str = "result",
) -> None:
    """``got`` has ``expected``'s dtype and shape, and each element is within the tolerance::

        |got - expected| <= atol + rtol * |expected|

    ``rtol`` and ``atol`` are each a number, an array that broadcasts
    against the leaf (a bound per row of an ``(n, d)`` leaf has shape
    ``(n, 1)``), ``None`` for the dtype's default (``DEFAULT_TOLERANCES``;
    float32: 1e-6; integers and booleans: 0, exact), or a pytree of those
    with the structure of ``expected`` or a prefix of it (a dict may leave
    keys out: they get the default)::

        assert_values_close(out, want, rtol={"y": row_bounds[:, None], "mean": 1e-5})

    Any NaN matches any NaN, an infinity only the same infinity; with
    ``flush`` a zero of the same sign matches a subnormal.  Complex numbers
    compare on the modulus of the difference (``|expected|`` its modulus);
    where a component is NaN or infinite, component by component.  Each
    element may be close to ``expected`` or to one of ``alternatives``.
    Pytrees as in ``assert_values_equal``.  A failure names the leaf, how
    many elements are out, the worst (the largest error for the error
    allowed) with its absolute and relative error, its distance in ulp and
    its own bound; which shards hold wrong elements; a small leaf whole::

        assert_values_close(jax.nn.softmax(x), reference_softmax(x))
        assert_values_close(y, expected, rtol=1e-4)  # atol: the dtype's default
    """
    __tracebackhide__ = True
    _compare(got, expected, alternatives, rtol, atol, flush, what, missing=None)


def _compare(
    got: Any,
    expected: Any,
    alternatives: Sequence[Any],
    rtol: Tolerance,
    atol: Tolerance,
    flush: bool,
    what: str,
    *,
    missing: float | None,
) -> None:
    __tracebackhide__ = True
    if trees.is_array(got) and trees.is_array(expected):
        (rule,) = _leaf_rules(rtol, atol, expected, missing=missing)
        _compare_array(got, expected, alternatives, rule, flush, what)
        return
    pairs, want_def = _pairs(got, expected, name="expected", what=what)
    rules = _leaf_rules(rtol, atol, expected, missing=missing)
    others = []
    for k, alternative in enumerate(alternatives):
        leaves, treedef = jax.tree_util.tree_flatten(alternative)
        if treedef != want_def:
            raise ValueError(f"alternatives[{k}] has the structure {treedef}, expected has {want_def}")
        others.append(leaves)
    _judge_each(
        [
            (label, partial(_compare_array, g, w, [o[i] for o in others], rule, flush, label))
            for i, ((label, g, w), rule) in enumerate(zip(pairs, rules, strict=True))
        ]
    )


def _compare_array(
    got: Any, expected: Any, alternatives: Sequence[Any], rule: _Tolerance | None, flush: bool, what: str
) -> None:
    """One leaf: dtype, shape, then values (bit for bit when ``rule`` is None)."""
    __tracebackhide__ = True
    want = np.asarray(expected)
    have = host_copy(got, want)
    if have.dtype != want.dtype:
        raise AssertionFailed(
            "dtype",
            f"the {what} has the wrong dtype",
            expected=str(want.dtype),
            got=str(have.dtype),
            hint="keep the input's dtype: multiply by Python scalars (weakly typed), or cast back "
            "with .astype(x.dtype)",
        )
    if have.shape != want.shape:
        raise AssertionFailed(
            "shape",
            f"the {what} has the wrong shape",
            expected=f"shape {want.shape}",
            got=f"shape {have.shape}",
        )
    candidates = [want] + [np.asarray(a, dtype=want.dtype) for a in alternatives]
    for other in candidates[1:]:
        if other.shape != want.shape:
            raise ValueError(f"an alternative has shape {other.shape}, expected has {want.shape}")
    if rule is not None:
        _compare_close(got, have, candidates, rule, flush, what)
        return
    ok = values.values_match(have, candidates, flush=flush)
    if ok.all():
        return
    bad = np.argwhere(~ok)
    index = tuple(int(i) for i in bad[0])
    shown = " or ".join(dict.fromkeys(_show(c[index]) for c in candidates))
    raise AssertionFailed(
        "values",
        f"{len(bad)} of {want.size} elements of the {what} differ"
        + (f" (the first at {_where(index)})" if index else ""),
        expected=f"{what}{_where(index)} = {shown}",
        got=f"{what}{_where(index)} = {_show(have[index])}",
        hint=diagnosis.shard_diagnosis(got, have, want, ~ok, what) or diagnosis.exact_hint(have, want, ~ok),
        whole=_whole(have, want),
    )


def _whole(have: np.ndarray, want: np.ndarray) -> tuple[str, str] | None:
    got_text, want_text = diagnosis.whole(have), diagnosis.whole(want)
    return None if got_text is None or want_text is None else (got_text, want_text)


def _numeric(dtype: np.dtype) -> bool:
    return dtype.kind in "biufc" or values.is_float(dtype) or tolerance.is_integer(dtype)


def _show(value: Any) -> str:
    dtype = np.asarray(value).dtype
    if values.is_float(dtype) and not values.is_float(dtype):  # ml_dtypes' one-byte floats
        return f"{float(value)!r} (0x{int(np.asarray(value).view(np.uint8)):02x})"
    if _numeric(dtype):
        return values.show(value)
    return repr(value.item() if isinstance(value, np.generic) else value)


def _at(bound: tolerance.Bound, index: tuple[int, ...], shape: tuple[int, ...]) -> float:
    """A tolerance's value at one element."""
    return float(np.broadcast_to(np.asarray(bound, np.float64), shape)[index])


def _compare_close(
    got: Any, have: np.ndarray, candidates: list[np.ndarray], rule: _Tolerance, flush: bool, what: str
) -> None:
    __tracebackhide__ = True
    rtol, atol, source = rule.resolve(have.dtype)
    verdict = tolerance.judge(have, candidates, rtol=rtol, atol=atol, flush=flush)
    if verdict.ok.all():
        return
    bad = ~verdict.ok
    # The worst: the largest error for the error allowed; among equals, the largest error.
    flat = np.flatnonzero(bad)
    scores, errors = verdict.score.reshape(-1)[flat], verdict.error.reshape(-1)[flat]
    worst = int(flat[np.lexsort((-errors, -scores))[0]])
    index = tuple(int(i) for i in np.unravel_index(worst, have.shape))
    chosen = candidates[int(verdict.candidate[index])]
    g, w = have[index], chosen[index]
    error = float(verdict.error[index])
    if _numeric(have.dtype):
        magnitude = float(
            np.abs(np.asarray(w).astype(np.complex128 if have.dtype.kind == "c" else np.float64))
        )
        relative = error / magnitude if magnitude else (0.0 if error == 0 else math.inf)
    else:
        relative = math.inf
    ulps = tolerance.ulp_distances(np.asarray(have[index]).reshape(1), np.asarray(w).reshape(1))
    shown = " or ".join(dict.fromkeys(_show(c[index]) for c in candidates))
    far = f", {tolerance.show_ulp(float(ulps[0]))}" if ulps is not None else ""
    r_here, a_here = _at(rtol, index, have.shape), _at(atol, index, have.shape)
    per_element = isinstance(rtol, np.ndarray) or isinstance(atol, np.ndarray)
    own = "; this element's own" if per_element else ""
    bound = f"its bound {float(verdict.allowed[index]):.3g} = atol + rtol * |expected|"
    raise AssertionFailed(
        "close",
        f"{int(bad.sum())} of {have.size} elements of the {what} are not within the tolerance"
        + (f" (the worst at {_where(index)})" if index else ""),
        expected=f"{what}{_where(index)} = {shown}, within rtol={r_here:g}, atol={a_here:g} "
        f"({source}{own}), {bound}",
        got=f"{what}{_where(index)} = {_show(g)}: absolute error {error:.3g}, "
        f"relative error {relative:.3g}{far}",
        hint=diagnosis.shard_diagnosis(got, have, chosen, bad, what)
        or diagnosis.close_hint(have, candidates, verdict, atol),
        whole=_whole(have, candidates[0]),
    )


def _describe(sharding: Any) -> str:
    """A sharding with its mesh's device ids, so that a failure can be rebuilt (show.py)."""
    if type(sharding).__name__ == "UnspecifiedValue":
        return jit_probe.describe(sharding)
    return show.sharding_text(sharding)


def _shards(array: jax.Array) -> dict[int, list[tuple[tuple[int, int], ...]]]:
    """Device id -> the index ranges of the shards on it ([start, stop) per dimension)."""
    found: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for shard in array.addressable_shards:
        found.setdefault(int(shard.device.id), []).append(diagnosis.index_ranges(shard.index, array.shape))
    return found


def _require_array(result: Any, what: str) -> jax.Array:
    __tracebackhide__ = True
    if not isinstance(result, jax.Array):
        raise AssertionFailed(
            "not-an-array",
            f"the {what} is not a jax.Array, so it has no layout to check",
            expected="a jax.Array",
            got=f"{type(result).__module__}.{type(result).__qualname__}",
            hint="return the jitted function's output itself, not np.asarray(...) or a Python list",
        )
    return result


_LAYOUT_HELP = "a jax.sharding.Sharding, a PartitionSpec (on the context's mesh)"


def _layout(value: Any, name: str) -> Sharding:
    """A Sharding, or a PartitionSpec made a NamedSharding on the context's mesh; else TypeError."""
    if isinstance(value, Sharding):
        return value
    if isinstance(value, PartitionSpec):
        mesh = internals.context_mesh()
        if mesh is None:
            raise TypeError(
                f"{name}={value!r} is a PartitionSpec, and there is no mesh in the context to apply it "
                f"to: pass NamedSharding(mesh, {value!r}), or call under jax.set_mesh(mesh)"
            )
        return NamedSharding(mesh, value)
    raise TypeError(f"{name}={value!r} must be {_LAYOUT_HELP}, or None for any")


def _is_layout_leaf(value: Any) -> bool:
    return value is None or isinstance(value, (Sharding, PartitionSpec))


def _targets(result: Any, target: Any, what: str) -> list[tuple[str, Any, Sharding | None]]:
    """(label, leaf, its layout or None for any) for each leaf of ``result``."""
    __tracebackhide__ = True
    if isinstance(target, (Sharding, PartitionSpec)):
        sharding = _layout(target, "target")
        leaves = [] if trees.is_array(result) else trees.named_leaves(result)[0]
        if not leaves:  # an array, or nothing at all (which fails as not an array)
            return [(what, result, sharding)]
        return [(what + path, leaf, sharding) for path, leaf in leaves]
    if target is None:
        raise TypeError(
            f"target=None must be {_LAYOUT_HELP}, or a pytree of them with the {what}'s structure"
        )
    layouts, target_def = trees.named_leaves(target, is_leaf=_is_layout_leaf)
    resolved = []
    for path, layout in layouts:
        if not _is_layout_leaf(layout):
            raise TypeError(
                f"target{path}={layout!r} must be {_LAYOUT_HELP} or None for any: target is one of "
                f"those, or a pytree of them with the {what}'s structure"
            )
        resolved.append(None if layout is None else _layout(layout, f"target{path}"))
    leaves, result_def = trees.named_leaves(result, is_leaf=lambda v: v is None)
    if result_def != target_def:
        raise _structure_failure(
            result,
            result_def,
            [p for p, _ in leaves],
            target,
            target_def,
            [p for p, _ in layouts],
            name="target",
            what=what,
        )
    return [(what + path, leaf, s) for (path, leaf), s in zip(leaves, resolved, strict=True)]


def _fits(leaf: Any, target: Sharding, what: str) -> None:
    """A partition spec naming more dimensions than the array has is a wrong rank, not JAX's
    IndexError (the public forms only: the kit's single-array forms are as they were)."""
    __tracebackhide__ = True
    spec = getattr(target, "spec", None)
    if isinstance(leaf, jax.Array) and isinstance(spec, PartitionSpec) and len(spec) > leaf.ndim:
        raise AssertionFailed(
            "layout",
            f"the {what} has fewer dimensions than the target layout splits",
            expected=f"an array of {len(spec)} or more dimensions laid out as {_describe(target)}",
            got=f"an array of shape {leaf.shape}",
        )


def _layout_leaf(leaf: Any, target: Sharding, *, shards: bool, what: str) -> None:
    __tracebackhide__ = True
    _fits(leaf, target, what)
    assert_array_layout(leaf, target, shards=shards, what=what)


def _shards_leaf(leaf: Any, target: Sharding, *, what: str) -> None:
    __tracebackhide__ = True
    _fits(leaf, target, what)
    assert_array_shards(leaf, target, what=what)


def assert_layout(
    result: PyTree, target: Layout | PyTree, *, shards: bool = True, what: str = "result"
) -> None:
    """``result`` is a ``jax.Array`` laid out as ``target``: its sharding is equivalent to it, in the
    same memory kind, and (``shards=True``) every addressable shard lies on the device and
    covers the index ranges that ``target`` gives that device (``assert_shards``).

    ``target`` is a ``Sharding``, or a ``PartitionSpec`` on the mesh of the
    context (``jax.set_mesh(mesh)``, ``with mesh:``).  ``result`` may be a
    pytree: one ``target`` then applies to every leaf, or ``target`` is a
    pytree of layouts with ``result``'s structure (``None``: any layout)::

        assert_layout(y, NamedSharding(mesh, P("rows", "cols")))
        with jax.set_mesh(mesh):
            assert_layout({"w": w, "b": b}, {"w": P("rows", None), "b": None})
    """
    __tracebackhide__ = True
    if isinstance(target, Sharding) and isinstance(result, jax.Array):
        _layout_leaf(result, target, shards=shards, what=what)
        return
    _judge_each(
        [
            (label, partial(_layout_leaf, leaf, s, shards=shards, what=label))
            for label, leaf, s in _targets(result, target, what)
            if s is not None
        ]
    )


def assert_shards(result: PyTree, target: Layout | PyTree, *, what: str = "result") -> None:
    """Every addressable shard of ``result`` lies on the device, and covers the index ranges,
    that ``target`` gives it for ``result``'s shape, and no device holds a shard it should not.

    ``target`` and pytrees as in ``assert_layout``::

        assert_shards(y, NamedSharding(mesh, P("rows")))
    """
    __tracebackhide__ = True
    if isinstance(target, Sharding) and isinstance(result, jax.Array):
        _shards_leaf(result, target, what=what)
        return
    _judge_each(
        [
            (label, partial(_shards_leaf, leaf, s, what=label))
            for label, leaf, s in _targets(result, target, what)
            if s is not None
        ]
    )


def assert_array_layout(result: Any, target: Sharding, *, shards: bool = True, what: str = "result") -> None:
    """``assert_layout`` for one ``jax.Array`` and one ``Sharding``: anything else fails as not an
    array (the kit's layout checks)."""
    __tracebackhide__ = True
    array = _require_array(result, what)
    memory = getattr(array.sharding, "memory_kind", None)
    if memory is not None and target.memory_kind is not None and memory != target.memory_kind:
        raise AssertionFailed(
            "memory-kind",
            f"the {what} is not in the memory the target layout names",
            expected=f"memory_kind={target.memory_kind!r}",
            got=f"memory_kind={memory!r} ({array.sharding!r})",
            hint="leave the output in device memory: no memory_kind='pinned_host' or other offloading",
        )
    if not array.sharding.is_equivalent_to(target, array.ndim):
        got_ids = sorted(int(getattr(d, "id", -1)) for d in array.sharding.device_set)
        want_ids = sorted(int(getattr(d, "id", -1)) for d in target.device_set)
        if got_ids != want_ids:
            hint = (
                f"the {what} lies on devices {got_ids}, the target on {want_ids}: build the output "
                f"sharding from the mesh you were given"
            )
        elif array.sharding.is_fully_replicated:
            hint = (
                f"the right devices, but each holds the whole {what} (replicated), where the target "
                "splits it: give jax.jit out_shardings the target layout (no out_shardings, or P(), "
                "replicates)"
            )
        elif target.is_fully_replicated:
            hint = (
                f"the right devices, but the {what} is split, where the target has every device hold "
                "the whole of it (replicated): its partition spec names no mesh axis"
            )
        else:
            hint = (
                "the right devices, split another way: compare the partition specs, and the order "
                "of the mesh's devices and axes"
            )
        raise AssertionFailed(
            "layout",
            f"the {what} does not have the requested layout",
            expected=f"a sharding equivalent to {_describe(target)}",
            got=_describe(array.sharding),
            hint=hint,
        )
    if shards:
        assert_array_shards(array, target, what=what)


def assert_array_shards(result: Any, target: Sharding, *, what: str = "result") -> None:
    """``assert_shards`` for one ``jax.Array`` and one ``Sharding`` (the kit's shard check)."""
    __tracebackhide__ = True
    array = _require_array(result, what)
    want_map: Any = target.addressable_devices_indices_map(array.shape)
    want = {int(d.id): [diagnosis.index_ranges(i, array.shape)] for d, i in want_map.items()}
    got = _shards(array)
    if got == want:
        return
    device = sorted(set(got) ^ set(want) or {d for d in want if got.get(d) != want[d]})[0]
    raise AssertionFailed(
        "shards",
        f"the {what}'s shards are not where the target layout puts them (device {device} first differs)",
        expected=f"device {device} holds {_ranges(want.get(device))}",
        got=f"device {device} holds {_ranges(got.get(device))}",
        hint="each device must hold exactly the block the target sharding assigns it: "
        "check the partition spec and the order of the mesh's devices",
    )


def assert_replicas_agree(x: PyTree, *, what: str = "x") -> None:
    """Every replica of every shard of ``x`` holds the same bits (NaN payloads and signs of zero
    included): the copies of one block on several devices (a replicated output, or an axis the
    spec leaves out) agree.  A ``shard_map`` with ``check_vma=False`` (``check_rep``) whose
    output claims to be replicated over an axis it did not reduce over passes value and layout
    assertions, which read one copy, and fails here.  Pytrees: every leaf is judged::

        assert_replicas_agree(shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P(), check_vma=False)(a))
    """
    __tracebackhide__ = True
    if isinstance(x, jax.Array):
        _replicas_leaf(x, what)
        return
    leaves, _ = trees.named_leaves(x)
    _judge_each([(what + path, partial(_replicas_leaf, leaf, what + path)) for path, leaf in leaves])


def _replicas_leaf(x: Any, what: str) -> None:
    __tracebackhide__ = True
    array = _require_array(x, what)
    copies: dict[tuple[tuple[int, int], ...], list[tuple[int, np.ndarray]]] = {}
    for shard in array.addressable_shards:
        block = diagnosis.index_ranges(shard.index, array.shape)
        copies.setdefault(block, []).append((int(shard.device.id), np.asarray(shard.data)))
    for block, held in sorted(copies.items()):
        (first_id, first), *rest = sorted(held, key=lambda pair: pair[0])
        raw = np.ascontiguousarray(first).view(np.uint8)
        for device, data in rest:
            if np.array_equal(np.ascontiguousarray(data).view(np.uint8), raw):
                continue
            agree = [first_id] + [
                d for d, v in rest if np.array_equal(np.ascontiguousarray(v).view(np.uint8), raw)
            ]
            differ = [d for d, _ in rest if d not in agree]
            return_text = (
                diagnosis.whole(data) or f"values differing at {int((data != first).sum())} element(s)"
            )
            raise AssertionFailed(
                "replicas",
                f"the replicas of block {diagnosis.block_text(block)} of the {what} differ "
                f"(devices {agree} agree, {differ} do not)",
                expected=f"device {device} holds what device {first_id} holds: "
                f"{diagnosis.whole(first) or 'the same bits'}",
                got=f"device {device} holds {return_text}",
                hint="the copies of a replicated block must be equal: a shard_map output whose out_specs "
                "leave out an axis must be reduced over it first (psum, pmean, all_gather); with "
                "check_vma=False (check_rep) JAX does not check this for you",
            )


def _ranges(blocks: list[tuple[tuple[int, int], ...]] | None) -> str:
    if not blocks:
        return "no shard"
    return ", ".join(diagnosis.block_text(block) for block in blocks)


# ---------------------------------------------------------------------------
# jit with given shardings


def _equivalent(sharding: Any, target: Sharding, ndim: int) -> bool:
    return isinstance(sharding, Sharding) and sharding.is_equivalent_to(target, ndim)


def _jit_layouts(value: Any, name: str) -> Sharding | list[Sharding | None]:
    """One layout for all, or one per input/output in pytree order (None: any); PartitionSpecs on
    the context's mesh."""
    if isinstance(value, (Sharding, PartitionSpec)):
        return _layout(value, name)
    layouts, _ = trees.named_leaves(value, is_leaf=_is_layout_leaf)
    if value is None or isinstance(value, (str, bytes)) or not all(_is_layout_leaf(s) for _, s in layouts):
        raise TypeError(
            f"{name}={value!r} must be {_LAYOUT_HELP}, or a sequence or pytree of them (None for any)"
        )
    return [None if s is None else _layout(s, f"{name}{path}") for path, s in layouts]


def _inputs_ok(call: jit_probe.JitCall, want: Sharding | Sequence[Sharding | None] | None) -> bool:
    if want is None:
        return True
    if isinstance(want, Sharding):
        return all(_equivalent(s, want, ndim) for ndim, s in call.inputs if ndim > 0)
    if len(want) > len(call.inputs):
        return False
    return all(w is None or _equivalent(s, w, ndim) for w, (ndim, s) in zip(want, call.inputs, strict=False))


def assert_jit_shardings(
    fn: Callable[..., Any],
    *args: Any,
    in_shardings: Layout | Sequence[Layout | None] | None,
    out_shardings: Layout | Sequence[Layout | None] | PyTree,
    **kwargs: Any,
) -> Any:
    """Call ``fn(*args, **kwargs)`` for real and check that ``jax.jit`` computed each output
    with the given shardings; return the result.

    ``out_shardings`` is one sharding for every output (the pytree's leaves),
    one per output in a sequence, or a pytree of them with the result's
    structure (``{"y": s, "stats": None}``), ``None`` for "any"; ``in_shardings`` is one sharding for
    every input array of that jit (scalars aside), one per input in order, or
    ``None`` for "any".  A ``PartitionSpec`` stands for a ``NamedSharding`` on
    the context's mesh (``jax.set_mesh(mesh)``).  An output computed outside
    ``jax.jit`` (eager ops, ``jax.device_put``), or by a jit that was given
    other shardings, fails: right values and even the right layout do not show
    that the computation was compiled with the shardings.  So does a jit that
    only placed a result computed outside any jit (on the host): given, instead
    of an argument, an array of its shape and dtype holding other values, with no
    argument reaching it, directly or through jits before it (an eager op runs as
    one).  The jit may be nested in others::

        y = assert_jit_shardings(f, x, in_shardings=s, out_shardings=[s, None])
    """
    __tracebackhide__ = True
    wanted_in = None if in_shardings is None else _jit_layouts(in_shardings, "in_shardings")
    wanted_out = _jit_layouts(out_shardings, "out_shardings")
    result, chains = jit_probe.observe_outputs(fn, *args, **kwargs)
    named, result_def = trees.named_leaves(result)
    leaves = [leaf for _, leaf in named]
    if not isinstance(out_shardings, (Sharding, PartitionSpec, list, tuple)):  # a pytree: its structure
        layouts, layouts_def = trees.named_leaves(out_shardings, is_leaf=_is_layout_leaf)
        if layouts_def != result_def:
            raise _structure_failure(
                result,
                result_def,
                [p for p, _ in named],
                out_shardings,
                layouts_def,
                [p for p, _ in layouts],
                name="out_shardings",
                what="result",
            )
    wanted = wanted_out if isinstance(wanted_out, list) else [wanted_out] * len(leaves)
    if len(wanted) != len(leaves):
        raise AssertionFailed(
            "outputs",
            "the function returned another number of outputs than out_shardings names",
            expected=f"{len(wanted)} output(s)",
            got=f"{len(leaves)} output(s)",
        )
    for (path, leaf), chain, target in zip(named, chains, wanted, strict=True):
        ndim = int(getattr(leaf, "ndim", 0))
        label = "the result" if len(leaves) == 1 else f"result{path}"
        if not chain:
            raise AssertionFailed(
                "not-jit",
                f"{label} is not computed by jax.jit",
                expected="an output of a jax.jit call",
                got="no jax.jit execution returned it (eager ops, jax.device_put, or a copy after the jit)",
                hint="compute it with jax.jit(f, in_shardings=..., out_shardings=...) and return that "
                "output as it is",
            )
        if any(
            (target is None or _equivalent(c.out_sharding, target, ndim)) and _inputs_ok(c, wanted_in)
            for c in chain
        ):
            if chain[0].fed is False:
                raise AssertionFailed(
                    "computed-before-jit",
                    f"{label} comes out of jax.jit with the given shardings, but that jit only placed it",
                    expected="a jit (or the jits before it) given the arguments themselves, computing "
                    "the result from them",
                    got=f"jit {chain[0].name!r} was given an array of an argument's shape and dtype "
                    "holding other values, computed outside any jit (on the host, with NumPy), and none "
                    "of the arguments",
                    hint="do the computation inside jax.jit(f, in_shardings=..., out_shardings=...), "
                    "applied to the arguments themselves, not to values computed before it",
                )
            continue
        outer = chain[-1]
        want_in = (
            "any"
            if wanted_in is None
            else _describe(wanted_in)
            if isinstance(wanted_in, Sharding)
            else "[" + ", ".join("any" if s is None else _describe(s) for s in wanted_in) + "]"
        )
        raise AssertionFailed(
            "jit-shardings",
            f"{label} comes out of jax.jit, but not with the given shardings",
            expected=f"in_shardings={want_in}, "
            f"out_shardings={'any' if target is None else _describe(target)}",
            got=f"jit {outer.name!r} with in_shardings=["
            + ", ".join(_describe(s) for _, s in outer.inputs)
            + f"], out_shardings={_describe(outer.out_sharding)}",
            hint=_jit_hint(outer, target, wanted_in, ndim),
        )
    return result


def _unspecified(sharding: Any) -> bool:
    return type(sharding).__name__ == "UnspecifiedValue"


def _layout_difference(got: Any, want: Sharding, ndim: int, name: str) -> str:
    """How the jit's sharding ``got`` differs from ``want``: not given, devices, their order, spec."""
    if _unspecified(got):
        return f"the jit was given no {name}"
    if isinstance(got, NamedSharding) and isinstance(want, NamedSharding):
        got_ids, want_ids = show.mesh_ids(got.mesh), show.mesh_ids(want.mesh)
        got_set = sorted(int(d.id) for d in got.mesh.devices.flat)
        want_set = sorted(int(d.id) for d in want.mesh.devices.flat)
        if got_set != want_set:
            return f"its {name} lie on devices {got_set}, the requested on {want_set}"
        if got.spec != want.spec:
            return (
                f"its {name} split by {show.spec_text(got.spec)}, the requested by "
                f"{show.spec_text(want.spec)} (mesh axes {dict(got.mesh.shape)} and {dict(want.mesh.shape)})"
            )
        if got_ids != want_ids or got.mesh.axis_names != want.mesh.axis_names:
            return (
                f"the same spec {show.spec_text(want.spec)} over the same devices in another order: "
                f"its mesh is {show.mesh_text(got.mesh)}, the requested {show.mesh_text(want.mesh)}"
            )
    return f"its {name} are {_describe(got)}, not equivalent to {_describe(want)} for {ndim}-D"


def _jit_hint(
    outer: jit_probe.JitCall,
    target: Sharding | None,
    wanted_in: Sharding | Sequence[Sharding | None] | None,
    ndim: int,
) -> str:
    """What differs between the jit that made the output and the shardings asked, and what fits."""
    found = []
    if target is not None and not _equivalent(outer.out_sharding, target, ndim):
        found.append(_layout_difference(outer.out_sharding, target, ndim, "out_shardings"))
    wants = (
        []
        if wanted_in is None
        else [wanted_in] * len(outer.inputs)
        if isinstance(wanted_in, Sharding)
        else list(wanted_in)
    )
    for k, (want, (in_ndim, got)) in enumerate(zip(wants, outer.inputs, strict=False)):
        if want is not None and in_ndim > 0 and not _equivalent(got, want, in_ndim):
            found.append(_layout_difference(got, want, in_ndim, f"in_shardings[{k}]"))
            break
    text = "; ".join(found) or "its shardings differ from those asked"
    if any(f.startswith("the jit was given no") for f in found):
        return (
            f"{text} -- or no jax.jit of yours made it: an op run outside jax.jit (eager jnp, "
            "jax.device_put) runs as a jit of its own, given no shardings: pass them to jax.jit "
            "itself (jax.jit(f, in_shardings=..., out_shardings=...)); without them the layout comes "
            "from the inputs (a jax.device_put before the jit places the data but does not compile "
            "the computation with the shardings)"
        )
    if "in another order" in text:
        return (
            f"{text}: build the shardings from the mesh you were given, as it is; a mesh made again "
            "(jax.make_mesh, sorted devices) orders the devices its own way"
        )
    return f"{text}: give jax.jit the shardings asked for"


# ---------------------------------------------------------------------------
# Compilation


class CompileCount:
    """What ``compiles()`` counts: ``count``, the XLA backend compiles in the block so far (its
    final number once the block ends), and ``names``, the functions compiled, as JAX names
    them (``"jit(f)"``)::

        with compiles() as seen:
            step(state, batch)
        print(seen.count, seen.names)  # 1 ['jit(step)']
    """

    def __init__(self) -> None:
        self._counter = internals.compile_counter()
        self._start = self._counter.count
        self._end: int | None = None

    @property
    def count(self) -> int:
        return (self._counter.count if self._end is None else self._end) - self._start

    @property
    def names(self) -> list[str]:
        return self._counter.names[self._start : self._start + self.count]

    def _close(self) -> None:
        self._end = self._counter.count

    def __repr__(self) -> str:
        return f"CompileCount(count={self.count}, names={self.names})"


@contextmanager
def compiles() -> Iterator[CompileCount]:
    """Count the XLA backend compiles in the block (in every thread of the process)::

        with compiles() as seen:
            f(jnp.ones(4))
            f(jnp.ones(4))
        assert seen.count == 1, seen.names

    For functions that cannot be called twice with the same arguments (they
    donate them): give each call fresh arrays.
    """
    seen = CompileCount()
    try:
        yield seen
    finally:
        seen._close()


@contextmanager
def assert_compiles_at_most(n: int, *, what: str = "the block") -> Iterator[CompileCount]:
    """The block compiles at most ``n`` times (XLA backend compiles); checked when the block ends
    without an exception::

        f(fresh())                          # the first call compiles
        with assert_compiles_at_most(0):
            f(fresh())                      # the next ones may not
    """
    __tracebackhide__ = True
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        raise TypeError(f"n={n!r} must be an int >= 0")
    with compiles() as seen:
        yield seen
    if seen.count > n:
        raise AssertionFailed(
            "recompiled",
            f"{what} compiled more often than allowed",
            expected=f"at most {n} backend compile(s)",
            got=f"{seen.count} backend compile(s): {', '.join(seen.names)}",
            hint="build each jitted function once and keep it: a new jax.jit(...) or a new lambda per "
            "call, a cache keyed on the arrays' identity, or arguments of new shapes, dtypes, "
            "shardings or static values recompile",
        )


def _ready(value: Any) -> Any:
    return jax.block_until_ready(value)


def _fresh(value: Any) -> Any:
    """A copy of an array argument: the same values, dtype, shape, sharding and committedness, in
    other buffers (so that a donating first call cannot spoil it); other values as they are."""
    if isinstance(value, jax.Array):
        return jax.device_put(value, may_alias=False)
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    return value


def _deleted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The first argument (and the path of its leaf) whose jax.Array was deleted, or None."""
    named = [(f"argument {i}", a) for i, a in enumerate(args)] + [
        (f"argument {k}", a) for k, a in kwargs.items()
    ]
    for name, value in named:
        for path, leaf in trees.named_leaves(value)[0]:
            if isinstance(leaf, jax.Array) and leaf.is_deleted():
                return name + (f" (its leaf {path})" if path else "")
    return None


def assert_compiles_once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn(*args, **kwargs)`` twice; the second call must compile nothing.

    Counts XLA backend compiles, so a function that builds a new
    ``jax.jit(...)`` (or a new lambda under one) per call fails, while one
    that keeps its jitted function passes.  The second call gets fresh copies
    of the array arguments (the same values, dtype, shape and sharding, other
    objects), so a cache keyed on the arrays' identity fails too.  Returns the
    second result.  A function that deletes an argument (buffer donation)
    cannot be called twice with the same arguments: it fails saying so; count
    its compiles with ``compiles()`` over calls on fresh arrays::

        assert_compiles_once(jax.jit(scale), x)
    """
    __tracebackhide__ = True
    again_args, again_kwargs = jax.tree_util.tree_map(_fresh, (args, kwargs))  # before any donation
    _ready(fn(*args, **kwargs))
    deleted = _deleted(args, kwargs)
    if deleted is not None:
        raise AssertionFailed(
            "donated",
            f"the first call deleted {deleted} (buffer donation), so the function cannot be called "
            "twice with the same arguments",
            expected=f"{deleted} still usable after the first call",
            got=f"{deleted} deleted (.is_deleted() is True)",
            hint="a function that donates its input (donate_argnums/donate_argnames) needs fresh "
            "arrays per call: count its compiles with `with compiles() as seen:` (or "
            "`with assert_compiles_at_most(0):`) around a call on fresh arrays after a first one",
        )
    with compiles() as seen:
        result = _ready(fn(*again_args, **again_kwargs))
    if seen.count:
        raise AssertionFailed(
            "recompiled",
            "a second call with the same arguments compiled again",
            expected="0 backend compiles in the second call",
            got=f"{seen.count} backend compile(s): {', '.join(seen.names)}",
            hint="build the jitted function once and keep it: a new jax.jit(...) or a new lambda per "
            "call, or a cache keyed on the arrays' identity (the second call gets fresh copies of "
            "the array arguments, equal in values, dtype, shape and sharding), recompiles",
        )
    return result


# ---------------------------------------------------------------------------
# The caller's input


def assert_input_intact(before: PyTree, x: PyTree, *, what: str = "x") -> None:
    """The caller's ``x`` still holds ``before`` (a host copy taken before the call): not
    deleted (buffer donation), the same dtype and shape, the same bits in every element.

    ``x`` may be a pytree; ``before`` then has its structure
    (``jax.tree_util.tree_map(np.array, x)``) and a failure names the leaf::

        before = np.array(x)
        y = f(x)
        assert_input_intact(before, x)
    """
    __tracebackhide__ = True
    if trees.is_array(before) and trees.is_array(x):
        _assert_array_intact(before, x, what)
        return
    pairs, _ = _pairs(x, before, name="before", what=what)
    _judge_each([(label, partial(_assert_array_intact, b, leaf, label)) for label, leaf, b in pairs])


def _assert_array_intact(before: Any, x: Any, what: str) -> None:
    __tracebackhide__ = True
    before = np.asarray(before)
    if isinstance(x, jax.Array) and x.is_deleted():
        raise AssertionFailed(
            "deleted",
            f"the caller's {what} was deleted by the call",
            expected=f"{what} still usable after the call",
            got=f"{what}.is_deleted() is True",
            hint="buffer donation (donate_argnums/donate_argnames) deletes the input, on CPU too; "
            "the caller still owns it",
        )
    now = host_copy(x, before)
    if before.ndim == 0 and now.ndim == 0:
        before, now = before.reshape(1), now.reshape(1)
    if (
        now.shape == before.shape
        and now.dtype != before.dtype
        and now.dtype.newbyteorder("=") == before.dtype
    ):
        now = now.astype(before.dtype)  # the same values in the caller's byte order
    if now.dtype != before.dtype or now.shape != before.shape:
        raise AssertionFailed(
            "changed",
            f"the caller's {what} was changed by the call",
            expected=f"{what} of dtype {before.dtype} and shape {before.shape}",
            got=f"{what} of dtype {now.dtype} and shape {now.shape}",
            hint="do not write into the input or replace its buffer (donation, in-place ops)",
        )
    if values.same_bytes(now, before):
        return  # the same bytes (a vector past 32 MiB: no copy per element)
    differs = (values.bits(now) != values.bits(before)).any(axis=-1)
    if differs.any():
        index = tuple(int(i) for i in np.argwhere(differs)[0])
        raise AssertionFailed(
            "changed",
            f"the caller's {what} was changed by the call",
            expected=f"{what}{_where(index)} = {values.show(before[index])}",
            got=f"{what}{_where(index)} = {values.show(now[index])}",
            hint="do not write into the input (in-place NumPy ops on np.asarray(x), donation)",
        )
