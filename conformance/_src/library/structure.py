"""Values with structure: the rows that break numerics, drawn by construction (``values(structure=...)``,
``sharded_arrays(structure=...)``).

Drawn over the whole range, or under bounds, the inputs that break a computation come only by
luck: a row with a large offset and a tiny spread, a row whose maximum overflows ``exp``, a row
that mixes magnitudes so far apart that a sum in the dtype loses the small ones.  With
``structure=`` every row along ``axis`` of every drawn array is built to be one of them:

* ``"offset"``: ``c + s*u``, ``|c|`` large (16 and up, or a 16th of the most the bounds and
  dtype allow), ``u`` in [-1, 1] (both ends in every row), ``s = |c| * 2**-q`` with ``q`` in
  ``[ceil(p/2), ceil(p/2) + 2]`` (``p`` the dtype's significand bits: 12 to 14 for float32).  A
  one-pass variance ``E[x**2] - E[x]**2`` in the dtype cancels every digit of ``s**2 / 3`` (and
  often goes negative: a NaN after ``sqrt``); a two-pass one, ``E[(x - E[x])**2]``, keeps about
  ``p - q`` bits (10 in float32).  ``|c| <= sqrt(max / (4 n))``: the sums of ``x`` and of
  ``x**2`` stay finite, so what goes wrong is cancellation, not overflow.
* ``"huge-max"``: the row's maximum ``H`` is finite in the dtype but ``exp(H)`` overflows it
  (``H >= ln(max) + 1``: 89.7 and up for float32 and bfloat16, 12.1 and up for float16); the other
  elements lie below it, some within a few units, all within ``2 H``.  A softmax or
  log-sum-exp without the max shift gives inf/inf = NaN; one with it is exact.
* ``"mixed-magnitudes"``: a large ``L`` and ``-L`` at two places at least two apart, the rest
  small values of one sign below a quarter of ``L``'s ulp.  The exact row sum is the sum of the
  small ones; a sum in the dtype loses each small value it adds to a partial sum that holds
  ``L`` (a sequential sum: every one between ``L`` and ``-L``).  Accumulating in a wider dtype,
  or a compensated sum, keeps them.

A sequence of kinds (``("offset", "huge-max")``) gives the rows the kinds in turn, from a drawn
one: an array of as many rows holds every kind.  The structured dtypes are float16, bfloat16,
float32 and float64; the values are finite and normal, within ``min_value``/``max_value`` where
given.  Each array's few parameters (the exponents, which kind comes first) are Hypothesis's
choices, and shrink; the rows' own variation comes from a generator Hypothesis seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from conformance._src.library.dtypes import Controls, _round_in, check

STRUCTURES = ("offset", "huge-max", "mixed-magnitudes")
STRUCTURED_DTYPES = ("float16", "bfloat16", "float32", "float64")
# The shortest row each kind needs: a spread needs two values, L and -L a small one between.
MIN_ROW = {"offset": 2, "huge-max": 1, "mixed-magnitudes": 3}
_LEVELS = 16  # a magnitude is drawn as one of this many steps across its range (log scale)
_EXTRA_SEPARATION = 4  # mixed-magnitudes: the small values lie 2**(2 + k) below L's ulp, k in [0, 4]


@dataclass(frozen=True)
class Structure:
    """What ``structure=`` and ``axis=`` asked for, checked."""

    kinds: tuple[str, ...]
    axis: int = -1

    @property
    def min_row(self) -> int:
        return max(MIN_ROW[k] for k in self.kinds)

    @property
    def text(self) -> str:
        return repr(self.kinds[0]) if len(self.kinds) == 1 else repr(self.kinds)


def structure_arg(structure: object, axis: object, wanted: Controls) -> Structure | None:
    """``structure=`` and ``axis=`` checked, with the value controls they cannot go with."""
    if structure is None:
        check(axis is None, f"axis={axis!r} is the axis of structure=: give a structure, or no axis")
        return None
    kinds: tuple[Any, ...] = ()
    if isinstance(structure, str):
        kinds = (structure,)
    else:
        try:
            kinds = tuple(structure)  # type: ignore[arg-type]
        except TypeError:
            kinds = ()
    check(
        bool(kinds) and all(k in STRUCTURES for k in kinds) and len(set(kinds)) == len(kinds),
        f"structure={structure!r} must be one of {STRUCTURES} or a sequence of distinct ones",
    )
    check(
        axis is None or (isinstance(axis, int) and not isinstance(axis, bool)),
        f"axis={axis!r} must be an int: the axis along which the rows of structure= lie",
    )
    how = Structure(kinds, -1 if axis is None else int(axis))  # type: ignore[call-overload]
    for name, value, why in (
        ("allow_nan", wanted.allow_nan, "structured rows are finite"),
        ("allow_infinity", wanted.allow_infinity, "structured rows are finite"),
        ("unique", wanted.unique, "structured rows may repeat values"),
    ):
        check(value is not True, f"{name}=True with structure={how.text}: {why}; leave {name} out")
    check(
        wanted.elements is None,
        f"elements= with structure={how.text}: the structure makes the elements; give one of them",
    )
    return how


def check_dtype(how: Structure, dtype: np.dtype) -> None:
    if dtype.name in STRUCTURED_DTYPES:
        return
    why = (
        "it has no rounding to cancel and no exp to overflow"
        if dtype.kind in "biu" or dtype.name.startswith(("int", "uint"))
        else "structure the real and imaginary parts as float arrays"
        if dtype.kind == "c"
        else "it has too few digits and too little range for these rows"
    )
    raise InvalidArgument(
        f"structure={how.text} draws float16, bfloat16, float32 or float64, not dtype={dtype.name}: {why}"
    )


def row_axis(how: Structure, dims: tuple[int, ...], *, drawn: bool = False) -> int:
    """``how.axis`` as an index into ``dims``, or InvalidArgument."""
    what = "the drawn shape" if drawn else "shape"
    check(
        -len(dims) <= how.axis < len(dims),
        f"axis={how.axis} is out of range for {what} {dims} (structure={how.text} lays rows along it)",
    )
    return how.axis % len(dims)


def rows_fit(how: Structure, dims: tuple[int, ...]) -> bool:
    """Whether ``dims`` has rows (no side 0) of ``how.min_row`` elements or more along the axis."""
    return math.prod(dims) > 0 and dims[row_axis(how, dims, drawn=True)] >= how.min_row


def check_shape(how: Structure, dims: tuple[int, ...]) -> None:
    axis = row_axis(how, dims)
    check(
        math.prod(dims) > 0 and dims[axis] >= how.min_row,
        f"shape={dims} has no rows of {how.min_row} elements or more along axis={how.axis}: "
        f"structure={how.text} needs them",
    )


# ---------------------------------------------------------------------------
# What each kind can draw in a dtype, under bounds


@dataclass(frozen=True)
class _Format:
    dtype: np.dtype
    p: int  # significand bits, the implicit one included
    fmax: float
    tiny: float  # the smallest normal
    lo: float  # the bounds, rounded inwards into the dtype (its finite range when none)
    hi: float
    min_value: float | None
    max_value: float | None

    def bounds_text(self) -> str:
        return f"min_value={self.min_value!r}, max_value={self.max_value!r}"


def _format(dtype: np.dtype, wanted: Controls) -> _Format:
    fi = ml_dtypes.finfo(dtype)
    fmax = float(fi.max)
    lo, hi = -fmax, fmax
    if wanted.min_value is not None:
        found = _round_in(dtype, float(wanted.min_value), True)
        lo = fmax if found is None else found
    if wanted.max_value is not None:
        found = _round_in(dtype, float(wanted.max_value), False)
        hi = -fmax if found is None else found
    return _Format(
        dtype,
        int(fi.nmant) + 1,
        fmax,
        float(fi.smallest_normal),
        lo,
        hi,
        None if wanted.min_value is None else float(wanted.min_value),
        None if wanted.max_value is None else float(wanted.max_value),
    )


def _prefer_large(a: float, b: float) -> tuple[float, float]:
    """A range of magnitudes within ``[a, b]`` that starts at 16 where it can: a "large" value."""
    return max(a, min(16.0, b / 16.0)), b


def _offset_ratios(f: _Format) -> tuple[int, int]:
    q = -(-f.p // 2)
    return q, min(q + 2, f.p - 2)


@dataclass(frozen=True)
class _Plan:
    """One kind's ranges in one dtype for rows of ``n``: magnitudes (per sign) and the like."""

    kind: str
    signs: tuple[tuple[float, float, float], ...] = ()  # (sign, least magnitude, largest magnitude)
    ratios: tuple[int, int] = (0, 0)


def plan(kind: str, dtype: np.dtype, wanted: Controls, n: int) -> _Plan:
    """What ``kind`` draws for rows of ``n`` in ``dtype`` under the bounds, or InvalidArgument."""
    f = _format(dtype, wanted)
    if kind == "offset":
        q_lo, q_hi = _offset_ratios(f)
        margin = 1 + 2.0 ** (1 - q_lo)  # room for the spread and its rounding
        cap = min(math.sqrt(f.fmax / (4 * n)), f.fmax / (4 * n))
        signs = []
        for sign, near, far in ((1.0, f.lo, f.hi), (-1.0, -f.hi, -f.lo)):
            least = max(near * margin if near > 0 else 0.0, 4 * f.tiny)
            most = min(far / margin, cap)
            if least <= most:
                signs.append((sign, *_prefer_large(least, most)))
        check(
            bool(signs),
            f"structure='offset' in {dtype.name} for rows of {n}: {f.bounds_text()} leave no room for "
            f"an offset c >= {4 * f.tiny:.3g} with a spread of |c| * 2**-{q_lo} around it "
            f"(and |c| <= {cap:.3g}, so that the row's sums stay finite)",
        )
        return _Plan(kind, tuple(signs), (q_lo, q_hi))
    if kind == "huge-max":
        threshold = _round_in(dtype, math.log(f.fmax) + 1, True)
        assert threshold is not None
        least = max(threshold, f.lo)
        most = min(f.hi, f.fmax / 4)
        check(
            least <= most,
            f"structure='huge-max' needs a row maximum of {threshold:.4g} or more in {dtype.name} "
            f"(exp overflows above ln(max) = {math.log(f.fmax):.4g}), within {f.bounds_text()}",
        )
        return _Plan(kind, ((1.0, least, min(most, least * 2.0**8)),))
    assert kind == "mixed-magnitudes"
    check(
        f.lo < 0 < f.hi,
        f"structure='mixed-magnitudes' needs min_value < 0 < max_value ({f.bounds_text()}): each row "
        f"holds a large value and its negative",
    )
    emin = math.log2(f.tiny)
    least = 2.0 ** (emin + f.p + 3)  # the smallest values, 2**-(p + 3) of L, stay normal
    most = min(math.sqrt(f.fmax) / 2, f.hi, -f.lo)
    check(
        least <= most,
        f"structure='mixed-magnitudes' in {dtype.name} needs a large value of {least:.3g} or more "
        f"(its small companions normal), within {f.bounds_text()}",
    )
    return _Plan(kind, ((1.0, *_prefer_large(least, most)),))


def check_feasible(how: Structure, dtype: np.dtype, wanted: Controls, n: int) -> None:
    for kind in how.kinds:
        plan(kind, dtype, wanted, n)


# ---------------------------------------------------------------------------
# Drawing


@st.composite
def structured(
    draw: st.DrawFn, *, dtype: np.dtype, dims: tuple[int, ...], how: Structure, wanted: Controls
) -> np.ndarray:
    """An array of ``dtype`` and ``dims`` whose every row along ``how.axis`` has a kind of ``how``."""
    axis = row_axis(how, dims, drawn=True)
    n = dims[axis]
    plans = [plan(kind, dtype, wanted, n) for kind in how.kinds]
    first = draw(st.integers(0, len(plans) - 1)) if len(plans) > 1 else 0
    knobs = [_knobs(draw, p) for p in plans]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    moved = tuple(d for i, d in enumerate(dims) if i != axis) + (n,)
    count = math.prod(moved[:-1])
    rows = np.empty((count, n), dtype)
    f = _format(dtype, wanted)
    which = (first + np.arange(count)) % len(plans)
    for k, p in enumerate(plans):
        mine = which == k
        if mine.any():
            rows[mine] = _rows(p, knobs[k], f, n, int(mine.sum()), rng)
    return np.ascontiguousarray(np.moveaxis(rows.reshape(moved), -1, axis))


def _knobs(draw: st.DrawFn, p: _Plan) -> dict[str, int]:
    """The Hypothesis choices of one kind: a magnitude step and, for some kinds, a ratio."""
    knobs = {"level": draw(st.integers(0, _LEVELS))}
    if p.kind == "offset":
        knobs["q"] = draw(st.integers(*p.ratios))
    if p.kind == "mixed-magnitudes":
        knobs["k"] = draw(st.integers(0, _EXTRA_SEPARATION))
    return knobs


def _magnitudes(p: _Plan, level: int, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each row's sign and magnitude: the drawn step across its sign's range (log scale), jittered."""
    table = np.array(p.signs, np.float64)
    picked = table[rng.integers(len(table), size=count)]
    sign, least, most = picked[:, 0], picked[:, 1], picked[:, 2]
    t = np.clip(level / _LEVELS + rng.uniform(-0.5, 0.5, count) / _LEVELS, 0.0, 1.0)
    size = np.exp2(np.log2(least) + t * (np.log2(most) - np.log2(least)))
    return sign, np.clip(size, least, most)


def _rows(
    p: _Plan, knobs: dict[str, int], f: _Format, n: int, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``count`` rows of ``n`` of one kind, in the dtype."""
    sign, size = _magnitudes(p, knobs["level"], count, rng)
    at = np.arange(count)
    if p.kind == "offset":
        u = rng.uniform(-1.0, 1.0, (count, n))
        low = rng.integers(n, size=count)
        u[at, low] = -1.0
        u[at, (low + rng.integers(1, n, size=count)) % n] = 1.0  # another place
        spread = size * 2.0 ** -knobs["q"]
        return _cast((sign * size)[:, None] + spread[:, None] * u, f.dtype)
    if p.kind == "huge-max":
        top = _cast(size, f.dtype, down=True).astype(np.float64)
        room = np.minimum(2 * top, top - f.lo)  # every element within [top - room, top]
        width = np.where(room > 1, np.exp2(rng.uniform(0, 1, count) * np.log2(np.maximum(room, 1))), room)
        near = rng.random((count, n)) < 0.5
        below = rng.random((count, n)) * np.where(near, np.minimum(width, 4.0)[:, None], width[:, None])
        row = top[:, None] - below
        row[at, rng.integers(n, size=count)] = top
        return _cast(row, f.dtype)
    large = _cast(size, f.dtype, down=True).astype(np.float64)
    exponent = np.floor(np.log2(large))
    room = exponent - math.floor(math.log2(f.tiny)) - f.p - 3  # how far the small values may go below
    k = np.clip(np.minimum(knobs["k"], room), 0, None)
    small = np.exp2(exponent - f.p + 1 - 2 - k)  # a quarter of L's ulp, and 2**-k of that
    row = rng.uniform(0.25, 1.0, (count, n)) * (small * np.where(rng.random(count) < 0.5, 1.0, -1.0))[:, None]
    i = rng.integers(0, n - 2, size=count)
    j = i + 2 + (rng.random(count) * (n - i - 2)).astype(np.int64)
    first_positive = rng.random(count) < 0.5
    row[at, i] = np.where(first_positive, large, -large)
    row[at, j] = np.where(first_positive, -large, large)
    return _cast(row, f.dtype)


def _cast(x: np.ndarray, dtype: np.dtype, *, down: bool = False) -> np.ndarray:
    """``x`` (float64) in ``dtype``, to nearest; ``down``: towards zero (a magnitude kept under its cap)."""
    out = x.astype(dtype)
    if down:
        over = np.abs(out.astype(np.float64)) > np.abs(x)
        if over.any():
            out[over] = np.nextafter(out[over], np.zeros_like(out[over]))
    return out
