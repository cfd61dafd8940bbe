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
from conformance._src.contract import oracle
from conformance._src.library import jit_probe, tolerance, trees

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
    "outputs",  # assert_jit_shardings
    "not-jit",
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

    def __init__(self, kind: str, summary: str, *, expected: str, got: str, hint: str | None = None) -> None:
        assert kind in KINDS, kind
        self.kind, self.summary, self.expected, self.got, self.hint = kind, summary, expected, got, hint
        lines = [summary, f"  expected: {expected}", f"  got:      {got}"]
        if hint:
            lines.append(f"  hint:     {hint}")
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
    return oracle.flush_subnormals(x)


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


@dataclass(frozen=True)
class _Tolerance:
    """The tolerance asked for: None for the leaf's dtype default."""

    rtol: float | None
    atol: float | None

    def resolve(self, dtype: np.dtype) -> tuple[float, float, str]:
        """rtol, atol, and where they come from (for the message)."""
        default = tolerance.default_tolerance(dtype)
        if default is None and (self.rtol is None or self.atol is None):
            raise TypeError(
                f"dtype {dtype} has no default tolerance (DEFAULT_TOLERANCES): pass rtol= and atol="
            )
        rtol = default if self.rtol is None else self.rtol
        atol = default if self.atol is None else self.atol
        assert rtol is not None and atol is not None
        sources = [n for n, v in (("rtol", self.rtol), ("atol", self.atol)) if v is None]
        source = (
            "as given"
            if not sources
            else f"{dtype}'s defaults"
            if len(sources) == 2
            else f"{sources[0]}: {dtype}'s default"
        )
        return rtol, atol, source


def assert_values_equal(
    got: PyTree,
    expected: PyTree,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
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
    ``rtol`` or ``atol`` other than 0 it is ``assert_values_close`` with them.

    ``got`` and ``expected`` may be pytrees of one structure (a tuple is not
    a stacked array); each leaf is judged and a failure names its path
    (``result['w'][0]``); each alternative then has that structure too::

        assert_values_equal(params, {"w": (w0, w1), "b": b})

    A failure's hint speaks of sharding only where the wrong elements line up
    with the shards of ``got`` (they fill some shards while the others are
    right, or lie on shard edges), naming those shards and their devices;
    otherwise it speaks of arithmetic.
    """
    __tracebackhide__ = True
    rtol_ = tolerance.checked("rtol", rtol)
    atol_ = tolerance.checked("atol", atol)
    rule = None if rtol_ == 0 and atol_ == 0 else _Tolerance(rtol_, atol_)
    if trees.is_array(got) and trees.is_array(expected):
        _compare_array(got, expected, alternatives, rule, flush, what)
    else:
        _compare_trees(got, expected, alternatives, rule, flush, what)


def assert_values_close(
    got: PyTree,
    expected: PyTree,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    alternatives: Sequence[PyTree] = (),
    flush: bool = True,
    what: str = "result",
) -> None:
    """``got`` has ``expected``'s dtype and shape, and each element is within the tolerance::

        |got - expected| <= atol + rtol * |expected|

    ``None`` (the default) is the dtype's default, ``DEFAULT_TOLERANCES``
    (float32: 1e-6; integers and booleans: 0, exact).  Any NaN matches any
    NaN, an infinity only the same infinity; with ``flush`` a zero of the same
    sign matches a subnormal.  Complex numbers compare on the modulus of the
    difference (``|expected|`` its modulus); where a component is NaN or
    infinite, component by component.  Each element may be close to
    ``expected`` or to one of ``alternatives``.  Pytrees as in
    ``assert_values_equal``.  A failure names how many elements are out, the
    worst (the largest error for the error allowed) with its absolute and
    relative error and its distance in ulp, and the tolerance used::

        assert_values_close(jax.nn.softmax(x), reference_softmax(x))
        assert_values_close(y, expected, rtol=1e-4)  # atol: the dtype's default
    """
    __tracebackhide__ = True
    rule = _Tolerance(
        tolerance.checked("rtol", rtol, allow_none=True), tolerance.checked("atol", atol, allow_none=True)
    )
    if trees.is_array(got) and trees.is_array(expected):
        _compare_array(got, expected, alternatives, rule, flush, what)
    else:
        _compare_trees(got, expected, alternatives, rule, flush, what)


def _compare_trees(
    got: Any, expected: Any, alternatives: Sequence[Any], rule: _Tolerance | None, flush: bool, what: str
) -> None:
    __tracebackhide__ = True
    pairs, want_def = _pairs(got, expected, name="expected", what=what)
    others = []
    for k, alternative in enumerate(alternatives):
        leaves, treedef = jax.tree_util.tree_flatten(alternative)
        if treedef != want_def:
            raise ValueError(f"alternatives[{k}] has the structure {treedef}, expected has {want_def}")
        others.append(leaves)
    _judge_each(
        [
            (label, partial(_compare_array, g, w, [o[i] for o in others], rule, flush, label))
            for i, (label, g, w) in enumerate(pairs)
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
    ok = oracle.values_match(have, candidates, flush=flush)
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
        hint=_sharding_hint(got, ~ok, what) or _exact_hint(have, want, ~ok),
    )


def _numeric(dtype: np.dtype) -> bool:
    return dtype.kind in "biufc" or oracle.is_float(dtype) or tolerance.is_integer(dtype)


def _show(value: Any) -> str:
    dtype = np.asarray(value).dtype
    if oracle.is_float(dtype) and not oracle.is_float(dtype):  # ml_dtypes' one-byte floats
        return f"{float(value)!r} (0x{int(np.asarray(value).view(np.uint8)):02x})"
    if _numeric(dtype):
        return oracle.show(value)
    return repr(value.item() if isinstance(value, np.generic) else value)


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
    raise AssertionFailed(
        "close",
        f"{int(bad.sum())} of {have.size} elements of the {what} are not within the tolerance"
        + (f" (the worst at {_where(index)})" if index else ""),
        expected=f"{what}{_where(index)} = {shown}, within rtol={rtol:g}, atol={atol:g} ({source})",
        got=f"{what}{_where(index)} = {_show(g)}: absolute error {error:.3g}, "
        f"relative error {relative:.3g}{far}",
        hint=_sharding_hint(got, bad, what) or _close_hint(have, candidates, verdict, rtol, atol),
    )


# -- hints --------------------------------------------------------------------------------


def _index(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape, strict=False))


def _block(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in ranges) + "]"


def _sharding_hint(got: Any, bad: np.ndarray, what: str) -> str | None:
    """A hint about sharding, only where the wrong elements line up with the shards of ``got``:
    they all lie on the first or last index of shards along a split dimension (an inner boundary
    among them), or they fill some shards (at least half of each) while the others are right."""
    if not isinstance(got, jax.Array) or got.ndim == 0 or bad.shape != got.shape:
        return None
    try:
        shards = got.addressable_shards
    except Exception:  # noqa: BLE001 -- a deleted or unusual array: no hint, never an error
        return None
    blocks: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for shard in shards:
        blocks.setdefault(_index(shard.index, got.shape), []).append(int(shard.device.id))
    if len(blocks) < 2:
        return None
    wrong = {}
    for ranges in blocks:
        region = bad[tuple(slice(a, b) for a, b in ranges)]
        if region.any():
            wrong[ranges] = (int(region.sum()), int(region.size))
    if not wrong:
        return None
    points = np.argwhere(bad)
    for dim in range(got.ndim):
        spans = sorted({r[dim] for r in blocks})
        if len(spans) < 2 or min(b - a for a, b in spans) < 3:
            continue  # not split along dim, or every index is at a shard's edge
        edges = {a for a, _ in spans} | {b - 1 for _, b in spans}
        inner = edges - {0, got.shape[dim] - 1}
        at = set(points[:, dim].tolist())
        if len(points) >= 2 and at <= edges and at & inner:
            return (
                f"every wrong element lies on the first or last index of a shard along dimension "
                f"{dim}, which the shards split at {', '.join(f'{a}:{b}' for a, b in spans)} (the wrong "
                f"ones in the shards on devices {sorted({d for r in wrong for d in blocks[r]})}): look at "
                "what crosses shard boundaries (a halo exchange, a shift or a roll, padding, an "
                "off-by-one in a shard's range)"
            )
    if (
        len(wrong) < len(blocks)
        and max(size for _, size in wrong.values()) > 1
        and all(2 * count >= size for count, size in wrong.values())
    ):
        listed = [f"{_block(r)} on device(s) {sorted(blocks[r])}" for r in sorted(wrong)]
        named = ", ".join(listed[:4]) + (f" and {len(listed) - 4} more" if len(listed) > 4 else "")
        return (
            f"the wrong elements fill {len(wrong)} of the {len(blocks)} shards of the {what}, "
            f"{named}, and every other shard is right: look at what those shards get differently "
            "(a collective over the wrong axis or devices, their share of the input, padding of "
            "the last shard)"
        )
    return None


def _within(ulps: np.ndarray | None) -> float | None:
    """The largest ulp distance of the wrong elements, if every one has a finite one."""
    if ulps is None or not len(ulps) or not np.isfinite(ulps).all():
        return None
    return float(ulps.max())


def _exact_hint(have: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    if tolerance.is_integer(have.dtype) or have.dtype.kind == "b":
        return (
            "integers are compared exactly: look at overflow (integers wrap in their dtype), a "
            "division or a cast that rounds, or the formula"
        )
    hint = (
        "values are compared bit for bit (any NaN matches any NaN; a zero of the same sign "
        "matches a subnormal): look at signs of zero, rounding through a narrower type, the "
        "order of a sum, or the formula"
    )
    most = _within(tolerance.ulp_distances(have[bad], want[bad]))
    default = tolerance.default_tolerance(have.dtype)
    if most is not None and most <= tolerance.ROUNDING_ULP and default:
        hint += (
            f"; every differing element is within {int(most)} ulp, as rounding differences are: "
            f"if they are acceptable here, compare with assert_values_close ({have.dtype}: "
            f"rtol=atol={default:g})"
        )
    return hint


def _round_up(x: float) -> float:
    """``x`` rounded up to one significant digit."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10.0 ** math.floor(math.log10(x))
    return math.ceil(x / scale * (1 - 1e-12)) * scale


def _close_hint(
    have: np.ndarray, candidates: list[np.ndarray], verdict: tolerance.Verdict, rtol: float, atol: float
) -> str:
    bad = ~verdict.ok
    if not _numeric(have.dtype):
        return f"values of dtype {have.dtype} are not numbers: they are compared for equality"
    if not np.isfinite(verdict.error[bad]).all():
        return (
            "a NaN or an infinity where a number is expected, or the reverse: look at overflow, "
            "0/0, the log of 0, or a mask that lets them through"
        )
    if tolerance.is_integer(have.dtype) or have.dtype.kind == "b":
        return (
            "integers are compared on their exact difference: look at overflow (integers wrap in "
            "their dtype), a division or a cast that rounds, or the formula"
        )
    chosen = (
        np.choose(verdict.candidate[bad], [c[bad] for c in candidates])
        if len(candidates) > 1
        else (candidates[0][bad])
    )
    most = _within(tolerance.ulp_distances(have[bad], chosen))
    if most is not None and most <= tolerance.ROUNDING_ULP:
        magnitudes = np.abs(chosen.astype(np.complex128 if have.dtype.kind == "c" else np.float64))
        errors = verdict.error[bad]
        if (magnitudes > 0).all():
            wanted = f"rtol={_round_up(float(((errors - atol) / magnitudes).max())):.0e}"
        else:
            wanted = f"atol={_round_up(float(errors.max())):.0e}"
        return (
            f"the wrong elements are within {int(most)} ulp: rounding, or another order of "
            f"accumulation; if that is acceptable here, a looser tolerance accepts them ({wanted})"
        )
    far = "" if most is None else f" ({int(most)} ulp)"
    return (
        f"further off than rounding{far}: look at the formula, the precision the computation runs in "
        "(a narrower type, jax.default_matmul_precision), or an accumulation that loses digits"
    )


# ---------------------------------------------------------------------------
# Layout


def _describe(sharding: Any) -> str:
    return jit_probe.describe(sharding)


def _shards(array: jax.Array) -> dict[int, list[tuple[tuple[int, int], ...]]]:
    """Device id -> the index ranges of the shards on it ([start, stop) per dimension)."""
    found: dict[int, list[tuple[tuple[int, int], ...]]] = {}
    for shard in array.addressable_shards:
        found.setdefault(int(shard.device.id), []).append(_index(shard.index, array.shape))
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
        hint = (
            f"the {what} lies on devices {got_ids}, the target on {want_ids}: build the output "
            f"sharding from the mesh you were given"
            if got_ids != want_ids
            else "the right devices, split another way: compare the partition specs, and the order of "
            "the mesh's devices and axes"
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
    want = {int(d.id): [_index(i, array.shape)] for d, i in want_map.items()}
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


def _ranges(blocks: list[tuple[tuple[int, int], ...]] | None) -> str:
    if not blocks:
        return "no shard"
    return ", ".join(_block(block) for block in blocks)


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
    that the computation was compiled with the shardings.  The jit may be
    nested in others::

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
            hint="pass the shardings to jax.jit itself (in_shardings=, out_shardings=); "
            "a device_put before or after the jit does not compile the computation with them",
        )
    return result


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
    differs = (oracle.bits(now) != oracle.bits(before)).any(axis=-1)
    if differs.any():
        index = tuple(int(i) for i in np.argwhere(differs)[0])
        raise AssertionFailed(
            "changed",
            f"the caller's {what} was changed by the call",
            expected=f"{what}{_where(index)} = {oracle.show(before[index])}",
            got=f"{what}{_where(index)} = {oracle.show(now[index])}",
            hint="do not write into the input (in-place NumPy ops on np.asarray(x), donation)",
        )
