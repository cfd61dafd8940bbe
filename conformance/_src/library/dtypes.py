"""Dtypes and their elements, for ``conformance.strategies``.

* ``dtypes``: the general dtype strategy (kinds, sizes, x64); the kit's
  contract domain (``contract=``) is the contract's (inputs/strategies.py);
* ``Carrier``/``carrier``: how ``values()`` draws a dtype's values over its
  whole range (as integers: bit patterns for floats), with its edge values;
* ``Controls``/``element_strategy``: the element strategy of a dtype under
  ``min_value``, ``max_value``, ``allow_nan``, ``allow_infinity``,
  ``allow_subnormal``, ``elements`` and ``unique``, checked when built and
  delegated to ``hypothesis.extra.numpy.from_dtype`` (bfloat16 and the
  float8 kinds, which it does not know, through float32, rounded).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp


def check(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidArgument(message)


# ---------------------------------------------------------------------------
# The dtypes JAX has, by kind

# Every float8 kind this JAX has (float8_e4m3fn, float8_e5m2, ...), and the
# sub-byte integers (int2/uint2 only where JAX has them).
_FLOAT8 = tuple(sorted(name for name in dir(jnp) if name.startswith("float8_")))
_INT4 = tuple(name for name in ("int4", "uint4", "int2", "uint2") if hasattr(jnp, name))

DTYPE_KINDS: dict[str, tuple[str, ...]] = {
    "bool": ("bool",),
    "int": ("int8", "int16", "int32", "int64"),
    "uint": ("uint8", "uint16", "uint32", "uint64"),
    "float": ("float32", "bfloat16", "float16", "float64"),
    "float8": _FLOAT8,
    "int4": _INT4,
    "complex": ("complex64", "complex128"),
}
# The order ``dtypes()`` samples in: float32 first, so it shrinks there.
_ORDER = (
    "float32",
    "bfloat16",
    "float16",
    "float64",
    *DTYPE_KINDS["int"],
    *DTYPE_KINDS["uint"],
    "bool",
    *DTYPE_KINDS["complex"],
    *_FLOAT8,
    *_INT4,
)
_KIND_OF = {name: kind for kind, names in DTYPE_KINDS.items() for name in names}
# The dtypes JAX gives only with jax_enable_x64 on (otherwise it makes them 32-bit, silently).
X64_NAMES = ("float64", "int64", "uint64", "complex128")


def dtype_arg(dtype: object) -> np.dtype:
    """``dtype`` as a NumPy dtype (JAX's names too: ``"bfloat16"``, ``"int4"``), or InvalidArgument."""
    try:
        return np.dtype(jax.numpy.dtype(dtype))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise InvalidArgument(f"dtype={dtype!r} is not a dtype") from None


def is_x64(dtype: np.dtype) -> bool:
    """Whether JAX holds ``dtype`` only with ``jax_enable_x64`` on."""
    return dtype.name in X64_NAMES


def x64_enabled() -> bool:
    return bool(jax.config.read("jax_enable_x64"))


def needs_x64(what: str, dtype: np.dtype) -> str:
    """The message for a 64-bit dtype while x64 is off."""
    return (
        f"{what} drew dtype {dtype.name}, but jax_enable_x64 is off, so JAX would make it "
        f"{dtype.name.replace('64', '32').replace('complex128', 'complex64')} silently. Enable x64 "
        f"(jax.config.update('jax_enable_x64', True), or JAX_ENABLE_X64=1 before JAX starts), "
        f"or leave 64-bit dtypes out (dtypes(x64=False))"
    )


def bits_of(dtype: np.dtype) -> int:
    """The width of ``dtype`` in bits (4 for int4, 64 for complex64)."""
    if dtype.name in _INT4:
        return int(ml_dtypes.iinfo(dtype).bits)
    return dtype.itemsize * 8


def dtypes(
    *,
    kinds: Sequence[str] | str | None = None,
    sizes: Sequence[int] | int | None = None,
    x64: bool | None = None,
) -> st.SearchStrategy[np.dtype]:
    """JAX dtypes of some ``kinds`` and ``sizes``, float32 first (so it shrinks there).

    ``kinds`` (default: all) picks some of ``"bool"``, ``"int"`` (int8 to
    int64), ``"uint"``, ``"float"`` (float16, bfloat16, float32, float64),
    ``"float8"`` (every ``jnp.float8_*`` this JAX has: float8_e4m3fn,
    float8_e5m2, ...), ``"int4"`` (int4, uint4, and int2/uint2 where JAX has
    them) and ``"complex"``.  ``sizes`` keeps the dtypes of those widths in
    bits (int4 is 4 bits, complex64 64).  No 64-bit dtype (float64, int64,
    uint64, complex128) unless ``x64=True`` or, with ``x64=None``, unless
    ``jax_enable_x64`` is on when the strategy is drawn: without it JAX would
    make them 32-bit.  ``values()`` and ``sharded_arrays()`` draw every dtype
    this gives.

    >>> dtypes(kinds=["float", "float8"], sizes=[8, 16]).example()  # doctest: +SKIP
    dtype(float8_e5m2)
    >>> @given(cst.sharded_arrays(dtype=cst.dtypes(kinds="int"), shape=(8,)))  # doctest: +SKIP
    ... def test_mine(x): ...
    """
    check(x64 in (None, True, False), f"x64={x64!r} must be True, False or None")
    chosen = _kinds_arg(kinds)
    widths = _sizes_arg(sizes)
    names = [n for n in _ORDER if _KIND_OF[n] in chosen]
    found = [np.dtype(jnp.dtype(n)) for n in names]
    found = [d for d in found if widths is None or bits_of(d) in widths]
    check(bool(found), f"no JAX dtype is of kinds={kinds!r} and sizes={sizes!r}")
    narrow = [d for d in found if not is_x64(d)]
    if x64 is not None:
        check(
            x64 or bool(narrow),
            f"every dtype of kinds={kinds!r} and sizes={sizes!r} is 64-bit, and x64=False",
        )
        return st.sampled_from(found if x64 else narrow)
    return _x64_dtypes(
        found=tuple(found), narrow=tuple(narrow), what=f"dtypes(kinds={kinds!r}, sizes={sizes!r})"
    )


@st.composite
def _x64_dtypes(
    draw: st.DrawFn, *, found: tuple[np.dtype, ...], narrow: tuple[np.dtype, ...], what: str
) -> np.dtype:
    """One of ``found``, or of ``narrow`` (no 64-bit dtype) while x64 is off when drawn."""
    pool = found if x64_enabled() else narrow
    if not pool:
        raise InvalidArgument(
            f"{what} has only 64-bit dtypes, and jax_enable_x64 is off: enable x64 "
            f"(jax.config.update('jax_enable_x64', True)), or pass x64=True to draw them anyway"
        )
    return draw(st.sampled_from(pool))


def _kinds_arg(kinds: object) -> set[str]:
    if kinds is None:
        return set(DTYPE_KINDS)
    chosen = [kinds] if isinstance(kinds, str) else kinds
    check(
        isinstance(chosen, (list, tuple, set, frozenset))
        and bool(chosen)
        and all(isinstance(k, str) and k in DTYPE_KINDS for k in chosen),
        f"kinds={kinds!r} must name some of {tuple(DTYPE_KINDS)}",
    )
    assert isinstance(chosen, (list, tuple, set, frozenset))
    check(all(DTYPE_KINDS[k] for k in chosen), f"kinds={kinds!r}: this JAX has no dtype of some of them")
    return set(chosen)


def _sizes_arg(sizes: object) -> set[int] | None:
    if sizes is None:
        return None
    widths = [sizes] if isinstance(sizes, int) and not isinstance(sizes, bool) else sizes
    check(
        isinstance(widths, (list, tuple, set, frozenset))
        and bool(widths)
        and all(type(w) is int and w >= 1 for w in widths),
        f"sizes={sizes!r} must be an int >= 1 (a width in bits) or a non-empty sequence of them",
    )
    assert isinstance(widths, (list, tuple, set, frozenset))
    return set(widths)


# ---------------------------------------------------------------------------
# What a dtype's values are drawn as: integers of a carrier dtype

# IEEE layouts (exponent bits, mantissa bits) of the float dtypes in the domain.
FLOAT_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def special_floats(dtype: np.dtype | str) -> np.ndarray:
    """Values where doubling goes wrong, as an array of ``dtype`` (float16, bfloat16, float32, float64).

    Both zeros, both infinities, NaNs (quiet, negative, with a payload), the
    extremes, the largest value whose double is finite and the smallest whose
    double overflows, the smallest normal, subnormals (among them ones whose
    double is normal), and a few ordinary numbers.

    >>> special_floats("bfloat16").size
    30
    """
    dtype = np.dtype(dtype)
    check(dtype.name in FLOAT_FORMATS, f"special_floats needs a real float dtype, got {dtype}")
    exp_bits, man_bits = FLOAT_FORMATS[dtype.name]
    inf = ((1 << exp_bits) - 1) << man_bits
    one = ((1 << (exp_bits - 1)) - 1) << man_bits
    magnitudes = [
        0,
        inf,
        inf | (1 << (man_bits - 1)),
        inf | 1,  # 0, inf, quiet NaN, NaN with payload
        inf - 1,  # largest finite
        inf - 1 - (1 << man_bits),  # largest whose double is finite
        ((1 << exp_bits) - 2) << man_bits,  # smallest whose double overflows
        1 << man_bits,  # smallest normal
        (1 << man_bits) - 1,  # largest subnormal
        1 << (man_bits - 1),  # a subnormal whose double is normal
        1,
        3,  # smallest subnormals
        one,
        one + (1 << (man_bits - 1)),
        one + 1,  # 1, 1.5, just above 1
    ]
    sign = 1 << (exp_bits + man_bits)
    bits = np.array(magnitudes + [m | sign for m in magnitudes], dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


def is_float8(dtype: np.dtype) -> bool:
    return dtype.name in _FLOAT8


def is_small_int(dtype: np.dtype) -> bool:
    return dtype.name in _INT4


def is_drawn_float(dtype: np.dtype) -> bool:
    """A real float dtype ``values()`` draws: the IEEE four and the float8 kinds."""
    return dtype.name in FLOAT_FORMATS or is_float8(dtype)


@functools.cache
def float_table(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every value of a float dtype of 1 or 2 bytes: the dtype's values in bit order, and as float64."""
    every = np.arange(2 ** (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}").view(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        return every, every.astype(np.float64)


def _float8_edges(dtype: np.dtype) -> np.ndarray:
    """The bit patterns of a float8 kind's edge values (``special_floats``' list, those the kind has).

    Both zeros, the infinities, NaNs of each sign (the first and the last
    pattern), the extremes, the largest value whose double is finite and the
    smallest whose double overflows, the smallest normal, the smallest and
    largest subnormals, and 1, 1.5 and the value just above 1 -- of each sign.
    """
    every, x = float_table(dtype)
    bits = every.view(np.uint8)
    finite = np.isfinite(x)
    fi = ml_dtypes.finfo(dtype)
    top, tiny = float(fi.max), float(fi.smallest_normal)
    magnitude = np.abs(x)
    sub = finite & (x != 0) & (magnitude < tiny)
    wanted: list[np.ndarray] = [finite & (x == 0), np.isinf(x), finite & (magnitude == top)]
    wanted.append(finite & (magnitude == magnitude[finite & (2 * magnitude <= top)].max()))
    over = finite & (2 * magnitude > top)
    wanted.append(finite & (magnitude == magnitude[over].min()))
    wanted.append(finite & (magnitude == tiny))
    if sub.any():
        wanted += [sub & (magnitude == magnitude[sub].min()), sub & (magnitude == magnitude[sub].max())]
    above = finite & (magnitude > 1)
    wanted += [magnitude == 1, magnitude == 1.5, above & (magnitude == magnitude[above].min())]
    picked = np.zeros(bits.size, dtype=bool)
    for mask in wanted:
        picked |= mask
    nans = np.flatnonzero(np.isnan(x))
    for negative in (False, True):
        signed = [i for i in nans if bool(bits[i] & 0x80) == negative]
        picked[signed[:1] + signed[-1:]] = True
    return bits[picked]


def iinfo(dtype: np.dtype) -> Any:
    return ml_dtypes.iinfo(dtype)


def integer_edges(dtype: np.dtype) -> list[int]:
    """The extremes, 0, 1, -1 (or 2) and the halves of an integer dtype."""
    info = iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    wanted = [lo, hi, 0, 1, -1 if lo < 0 else 2]
    wanted += [hi // 2, hi // 2 + 1, lo // 2, lo // 2 - 1]
    return sorted({e for e in wanted if lo <= e <= hi})


@dataclass(frozen=True)
class Carrier:
    """How ``values()`` draws a dtype over its whole range: integers of ``bits`` in ``[lo, hi]``.

    ``edges`` (of ``bits``) are mixed in; ``finish`` turns the integers into
    the dtype: a view for bit patterns (floats: every exponent, sign and NaN
    payload; bool), a conversion for the sub-byte integers.
    """

    bits: np.dtype
    edges: np.ndarray
    lo: int
    hi: int
    view: bool = True

    @property
    def full_range(self) -> bool:
        info = np.iinfo(self.bits)
        return (self.lo, self.hi) == (int(info.min), int(info.max))

    def finish(self, a: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return a.view(dtype) if self.view else a.astype(dtype)


def carrier(dtype: np.dtype) -> Carrier:
    """The carrier of a real dtype (``values()`` draws complex ones as pairs of floats)."""
    if dtype.name in FLOAT_FORMATS:
        bits = np.dtype(f"u{dtype.itemsize}")
        info = np.iinfo(bits)
        return Carrier(bits, special_floats(dtype).view(bits), int(info.min), int(info.max))
    if is_float8(dtype):
        return Carrier(np.dtype(np.uint8), _float8_edges(dtype), 0, 255)  # every byte is a value
    if dtype.kind == "b":
        return Carrier(np.dtype(np.uint8), np.array([0, 1], np.uint8), 0, 1)
    if is_small_int(dtype):
        info = iinfo(dtype)
        edges = np.array(integer_edges(dtype), np.int8)
        return Carrier(np.dtype(np.int8), edges, int(info.min), int(info.max), view=False)
    check(dtype.kind in "iu", f"values() has no strategy for dtype {dtype}")
    info = np.iinfo(dtype)
    return Carrier(dtype, np.array(integer_edges(dtype), dtype=dtype), int(info.min), int(info.max))


def complex_part(dtype: np.dtype) -> np.dtype:
    """The float dtype of a complex dtype's parts."""
    return np.dtype(f"float{dtype.itemsize * 4}")


# ---------------------------------------------------------------------------
# Elements under controls


@dataclass(frozen=True)
class Controls:
    """What ``values(min_value=..., ...)`` asks of the elements; nothing asked: the whole range."""

    min_value: float | None = None
    max_value: float | None = None
    allow_nan: bool | None = None
    allow_infinity: bool | None = None
    allow_subnormal: bool | None = None
    elements: st.SearchStrategy[Any] | None = None
    unique: bool = False

    @property
    def any(self) -> bool:
        return self != Controls()

    @property
    def bounded(self) -> bool:
        return self.min_value is not None or self.max_value is not None

    @property
    def flags(self) -> dict[str, bool | None]:
        return {
            "allow_nan": self.allow_nan,
            "allow_infinity": self.allow_infinity,
            "allow_subnormal": self.allow_subnormal,
        }


def controls(
    *,
    min_value: object = None,
    max_value: object = None,
    allow_nan: object = None,
    allow_infinity: object = None,
    allow_subnormal: object = None,
    elements: object = None,
    unique: object = False,
) -> Controls:
    """The value controls, checked as far as they can be without the dtype."""
    for name, bound in (("min_value", min_value), ("max_value", max_value)):
        check(
            bound is None
            or (
                isinstance(bound, numbers.Real)
                and not isinstance(bound, (bool, np.bool_))
                and math.isfinite(float(bound))
            ),
            f"{name}={bound!r} must be a finite real number or None",
        )
    if min_value is not None and max_value is not None:
        check(
            min_value <= max_value,  # type: ignore[operator]
            f"min_value={min_value!r} must be <= max_value={max_value!r}",
        )
    for name, flag in (
        ("allow_nan", allow_nan),
        ("allow_infinity", allow_infinity),
        ("allow_subnormal", allow_subnormal),
    ):
        check(flag in (None, True, False), f"{name}={flag!r} must be True, False or None")
    check(unique in (True, False), f"unique={unique!r} must be True or False")
    check(
        elements is None or isinstance(elements, st.SearchStrategy),
        f"elements={elements!r} must be a Hypothesis strategy for the elements",
    )
    if elements is not None:
        given = {
            "min_value": min_value,
            "max_value": max_value,
            "allow_nan": allow_nan,
            "allow_infinity": allow_infinity,
            "allow_subnormal": allow_subnormal,
        }
        clash = [f"{k}={v!r}" for k, v in given.items() if v is not None]
        check(
            not clash,
            f"elements= is the strategy for the elements: give it, or {', '.join(clash)}, not both "
            f"(put the bounds and flags in the elements strategy)",
        )
    bounded = min_value is not None or max_value is not None
    check(
        not (allow_nan and bounded),
        f"allow_nan=True with min_value={min_value!r} or max_value={max_value!r}: NaN lies in no range",
    )
    check(
        not (allow_infinity and min_value is not None and max_value is not None),
        f"allow_infinity=True with both min_value={min_value!r} and max_value={max_value!r}: "
        f"no infinity lies between them",
    )
    return Controls(
        min_value=None if min_value is None else min_value,  # type: ignore[arg-type]
        max_value=None if max_value is None else max_value,  # type: ignore[arg-type]
        allow_nan=allow_nan,  # type: ignore[arg-type]
        allow_infinity=allow_infinity,  # type: ignore[arg-type]
        allow_subnormal=allow_subnormal,  # type: ignore[arg-type]
        elements=elements,  # type: ignore[arg-type]
        unique=bool(unique),
    )


@dataclass(frozen=True)
class Elements:
    """A dtype's element strategy under controls, and how many distinct values it can give (if known)."""

    strategy: st.SearchStrategy[Any]
    distinct: int | None


def element_strategy(dtype: np.dtype, wanted: Controls, *, strict: bool = True) -> Elements:
    """The elements of ``dtype`` that obey ``wanted``, or InvalidArgument naming the argument at fault.

    ``strict=False`` (a dtype drawn from a strategy) ignores an ``allow_*=True``
    the dtype has no such values for; ``strict=True`` refuses it.  Built once
    per dtype and controls (a drawn dtype asks again at every draw).
    """
    # The bounds' reprs in the key: -0.0 == 0.0, but min_value=0.0 leaves out -0.0 and -0.0 does not.
    return _element_strategy(dtype, wanted, strict, (repr(wanted.min_value), repr(wanted.max_value)))


@functools.lru_cache(maxsize=256)
def _element_strategy(dtype: np.dtype, wanted: Controls, strict: bool, bounds: tuple[str, str]) -> Elements:
    if wanted.elements is not None:
        return Elements(wanted.elements, None)
    if dtype.kind == "c":
        part = _real_elements(complex_part(dtype), wanted, strict=strict, what=f"{dtype.name}'s parts")
        both = st.builds(complex, part.strategy, part.strategy).map(dtype.type)
        return Elements(both, None if part.distinct is None else part.distinct**2)
    return _real_elements(dtype, wanted, strict=strict, what=dtype.name)


def _flag_check(dtype: np.dtype, wanted: Controls, has: dict[str, bool], strict: bool, what: str) -> None:
    nouns = {"allow_nan": "NaN", "allow_infinity": "infinity", "allow_subnormal": "subnormal numbers"}
    for name, flag in wanted.flags.items():
        check(
            not (strict and flag and not has[name]),
            f"{name}=True, but {what} has no {nouns[name]}: leave {name} out for {dtype.name}",
        )


def _real_elements(dtype: np.dtype, wanted: Controls, *, strict: bool, what: str) -> Elements:
    if dtype.kind == "b":
        _flag_check(dtype, wanted, dict.fromkeys(wanted.flags, False), strict, what)
        check(
            not wanted.bounded,
            f"min_value={wanted.min_value!r}, max_value={wanted.max_value!r}: bool has no range to bound",
        )
        return Elements(hnp.from_dtype(dtype), 2)
    if is_drawn_float(dtype):
        return _float_elements(dtype, wanted, strict=strict, what=what)
    check(dtype.kind in "iu" or is_small_int(dtype), f"values() has no strategy for dtype {dtype}")
    _flag_check(dtype, wanted, dict.fromkeys(wanted.flags, False), strict, what)
    info = iinfo(dtype)
    smallest, largest = int(info.min), int(info.max)
    lo, hi = smallest, largest
    if wanted.min_value is not None:
        check(
            smallest <= wanted.min_value <= largest,
            f"min_value={wanted.min_value!r} is outside {dtype.name}'s range [{smallest}, {largest}]",
        )
        lo = math.ceil(wanted.min_value)
    if wanted.max_value is not None:
        check(
            smallest <= wanted.max_value <= largest,
            f"max_value={wanted.max_value!r} is outside {dtype.name}'s range [{smallest}, {largest}]",
        )
        hi = math.floor(wanted.max_value)
    check(
        lo <= hi, f"no integer lies between min_value={wanted.min_value!r} and max_value={wanted.max_value!r}"
    )
    main: st.SearchStrategy[Any]
    if is_small_int(dtype):
        main = st.integers(lo, hi)
    else:
        main = hnp.from_dtype(
            dtype,
            min_value=None if wanted.min_value is None else lo,
            max_value=None if wanted.max_value is None else hi,
        )
    edges = sorted({e for e in integer_edges(dtype) + [lo, hi] if lo <= e <= hi})
    return Elements(st.one_of(main, st.sampled_from(edges)), hi - lo + 1)


@dataclass(frozen=True)
class _FloatRule:
    """Which values of a float dtype obey the controls (flags read as ``st.floats`` reads them)."""

    lo: float | None
    hi: float | None
    nan: bool
    infinity: bool
    subnormal: bool
    tiny: float  # the smallest normal
    no_negative_zero: bool  # min_value is +0.0 (as floats(): -0.0 is below it)
    no_positive_zero: bool

    def ok(self, x: np.ndarray) -> np.ndarray:
        """Which float64 values (of the dtype) obey the rule."""
        with np.errstate(invalid="ignore"):
            nan = np.isnan(x)
            keep = ~nan | self.nan
            keep &= ~np.isinf(x) | self.infinity
            subnormal = (x != 0) & (np.abs(x) < self.tiny) & ~nan
            keep &= ~subnormal | self.subnormal
            if self.lo is not None:
                keep &= nan | (x >= self.lo)
            if self.hi is not None:
                keep &= nan | (x <= self.hi)
            zero = x == 0
            if self.no_negative_zero:
                keep &= ~(zero & np.signbit(x))
            if self.no_positive_zero:
                keep &= ~(zero & ~np.signbit(x))
        return keep


def _round_in(dtype: np.dtype, bound: float, up: bool) -> float | None:
    """The dtype's value nearest ``bound`` on the inside (up: the least >= bound), or None if none."""
    if dtype.itemsize <= 2:
        _, x = float_table(dtype)
        finite = x[np.isfinite(x)]
        inside = finite[finite >= bound] if up else finite[finite <= bound]
        if not inside.size:
            return None
        found = float(inside.min() if up else inside.max())
        return math.copysign(0.0, bound) if found == 0 else found
    near = dtype.type(bound)
    if up and float(near) < bound:
        near = np.nextafter(near, dtype.type(np.inf))
    if not up and float(near) > bound:
        near = np.nextafter(near, dtype.type(-np.inf))
    return float(near) if np.isfinite(near) else None


def _float_elements(dtype: np.dtype, wanted: Controls, *, strict: bool, what: str) -> Elements:
    fi = ml_dtypes.finfo(dtype)
    smallest, largest, tiny = float(fi.min), float(fi.max), float(fi.smallest_normal)
    if dtype.itemsize <= 2:
        _, table = float_table(dtype)
        with np.errstate(invalid="ignore"):
            has = {
                "allow_nan": bool(np.isnan(table).any()),
                "allow_infinity": bool(np.isinf(table).any()),
                "allow_subnormal": bool(((table != 0) & (np.abs(table) < tiny)).any()),
            }
    else:
        has = {"allow_nan": True, "allow_infinity": True, "allow_subnormal": True}
    _flag_check(dtype, wanted, has, strict, what)
    lo = hi = None
    if wanted.min_value is not None:
        check(
            smallest <= wanted.min_value <= largest,
            f"min_value={wanted.min_value!r} is outside {dtype.name}'s finite range [{smallest}, {largest}]",
        )
        lo = _round_in(dtype, float(wanted.min_value), up=True)
    if wanted.max_value is not None:
        check(
            smallest <= wanted.max_value <= largest,
            f"max_value={wanted.max_value!r} is outside {dtype.name}'s finite range [{smallest}, {largest}]",
        )
        hi = _round_in(dtype, float(wanted.max_value), up=False)
    check(
        (wanted.min_value is None or lo is not None)
        and (wanted.max_value is None or hi is not None)
        and (lo is None or hi is None or lo <= hi),
        f"no {dtype.name} value lies between min_value={wanted.min_value!r} "
        f"and max_value={wanted.max_value!r}",
    )
    bounded = wanted.bounded
    rule = _FloatRule(
        lo=lo,
        hi=hi,
        nan=has["allow_nan"] and (wanted.allow_nan if wanted.allow_nan is not None else not bounded),
        infinity=has["allow_infinity"]
        and (
            wanted.allow_infinity
            if wanted.allow_infinity is not None
            else wanted.min_value is None or wanted.max_value is None
        ),
        subnormal=has["allow_subnormal"] and wanted.allow_subnormal is not False,
        tiny=tiny,
        no_negative_zero=lo == 0 and wanted.min_value is not None and _positive(wanted.min_value),
        no_positive_zero=hi == 0 and wanted.max_value is not None and not _positive(wanted.max_value),
    )
    if wanted.allow_subnormal and has["allow_subnormal"]:
        check(
            (lo is None or lo < tiny) and (hi is None or hi > -tiny),
            f"allow_subnormal=True, but min_value={wanted.min_value!r} and max_value={wanted.max_value!r} "
            f"leave out {dtype.name}'s subnormal numbers (below {tiny} in magnitude)",
        )
    edges = _edge_values(dtype, rule, lo, hi)
    main: st.SearchStrategy[Any]
    distinct: int | None = None
    if dtype.itemsize <= 2:
        every, table = float_table(dtype)
        allowed = every[rule.ok(table) & np.isfinite(table)]
        check(
            allowed.size > 0 or rule.nan or rule.infinity,
            f"no {dtype.name} value obeys min_value={wanted.min_value!r}, max_value={wanted.max_value!r} "
            f"and allow_subnormal={wanted.allow_subnormal!r}",
        )
        if not rule.nan:
            distinct = len(set(table[rule.ok(table)].tolist()))
    if dtype.name in _NATIVE_FLOATS:  # hypothesis draws them itself
        main = hnp.from_dtype(
            dtype,
            min_value=lo,
            max_value=hi,
            allow_nan=wanted.allow_nan if has["allow_nan"] else None,
            allow_infinity=wanted.allow_infinity if has["allow_infinity"] else None,
            allow_subnormal=wanted.allow_subnormal if has["allow_subnormal"] else None,
        )
        if dtype.itemsize > 2 and not rule.nan and lo is not None and hi is not None:
            distinct = _ordinal(dtype, hi) - _ordinal(dtype, lo) + 1
    else:  # bfloat16, float8: through float32, rounded; a value the rule refuses is replaced
        main = _rounded(
            dtype=dtype,
            low=smallest if lo is None else lo,
            high=largest if hi is None else hi,
            rule=rule,
            allowed=tuple(allowed.tolist()) if allowed.size else tuple(edges),
        )
    return Elements(st.one_of(main, st.sampled_from(edges)) if edges else main, distinct)


_NATIVE_FLOATS = ("float16", "float32", "float64")


def _positive(bound: float) -> bool:
    """Whether a bound's sign is +: 0 and 0.0 are +0.0 (below them lies -0.0), -0.0 is not."""
    return math.copysign(1.0, float(bound)) > 0


def _ordinal(dtype: np.dtype, value: float) -> int:
    """Where ``value`` lies among the dtype's values in order (-0.0 and 0.0 at the same place)."""
    bits = int(np.array(value, dtype).view(f"i{dtype.itemsize}"))
    return bits if bits >= 0 else -(bits & ((1 << (8 * dtype.itemsize - 1)) - 1))


def _edge_values(dtype: np.dtype, rule: _FloatRule, lo: float | None, hi: float | None) -> list[Any]:
    """The dtype's edge values (``special_floats``, the float8 edges), the bounds and 0 that obey ``rule``."""
    edges = carrier(dtype).edges.view(dtype)
    extra = np.array([v for v in (lo, hi, 0.0, -0.0) if v is not None], np.float64).astype(dtype)
    candidates = np.concatenate([edges, extra])
    with np.errstate(invalid="ignore"):
        keep = candidates[rule.ok(candidates.astype(np.float64))]
    bits = keep.view(f"u{dtype.itemsize}")
    _, first = np.unique(bits, return_index=True)
    return [keep[i] for i in sorted(first)]


@st.composite
def _rounded(
    draw: st.DrawFn, *, dtype: np.dtype, low: float, high: float, rule: _FloatRule, allowed: tuple[Any, ...]
) -> Any:
    """A float32 in ``[low, high]`` rounded to ``dtype`` (bounds of the dtype: they stay in);
    one the rule refuses (a subnormal, or a NaN of a kind without infinities) becomes an allowed value."""
    x = draw(st.floats(min_value=low, max_value=high, width=32, allow_nan=False, allow_infinity=False))
    value = np.array(x, np.float32).astype(dtype)
    with np.errstate(invalid="ignore"):
        if rule.ok(value.astype(np.float64).reshape(1))[0]:
            return value[()]
    return draw(st.sampled_from(allowed))


def cast_element(value: Any, dtype: np.dtype) -> np.ndarray:
    """``value`` (drawn from an element strategy) as a 0-d array of ``dtype``, or InvalidArgument
    if ``dtype`` cannot hold it exactly."""
    if isinstance(value, np.generic) and value.dtype == dtype:
        return np.asarray(value)
    try:
        with np.errstate(all="ignore"):
            if dtype.kind == "b":
                ok = isinstance(value, (bool, np.bool_))
                out = np.array(bool(value))
            elif dtype.kind in "iu" or is_small_int(dtype):
                number = int(value)
                info = iinfo(dtype)
                ok = number == value and int(info.min) <= number <= int(info.max)
                out = np.array(number if ok else 0, np.int64 if number < 2**63 else np.uint64).astype(dtype)
            elif dtype.kind == "c":
                number_c = complex(value)
                out = np.array(number_c, np.complex128).astype(dtype)
                back = complex(out.astype(np.complex128))
                ok = _same(back.real, number_c.real) and _same(back.imag, number_c.imag)
            else:
                number_f = float(value)
                out = np.array(number_f, np.float64).astype(dtype)
                ok = _same(float(out.astype(np.float64)), number_f)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InvalidArgument(f"elements drew {value!r}, which {dtype.name} cannot hold exactly")
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b
