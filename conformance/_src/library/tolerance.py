"""Tolerances per dtype, ulp distances, and the closeness rule of ``assert_values_close``.

The rule, element by element, against one expected value ``w`` (``g`` got)::

    |g - w| <= atol + rtol * |w|

* any NaN matches any NaN; a NaN never matches a number;
* an infinity matches only the same infinity (same sign), whatever the tolerance;
* with ``flush``, a zero of the same sign matches a subnormal ``w`` (XLA on CPU
  flushes subnormals), whatever the tolerance;
* complex numbers: ``|.|`` is the modulus (``|g - w|`` the distance in the
  complex plane, ``|w|`` the expected modulus), as NumPy's ``allclose`` and
  JAX's test utilities do; where a component of either is NaN or infinite,
  each component is judged by the rules above on its own;
* integers and booleans are compared on their exact difference (booleans as
  0 and 1); with the default tolerance 0 they must be equal.

Everything here is NumPy on host data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType

import ml_dtypes
import numpy as np

from conformance._src.library.values import is_float

# The default ``rtol`` and ``atol`` (both) of ``assert_values_close`` per dtype, by dtype name:
# JAX's own test utilities' table (jax._src.public_test_util).  Integers and booleans compare
# exactly; a dtype not named here has no default (pass rtol= and atol=).
DEFAULT_TOLERANCES: Mapping[str, float] = MappingProxyType(
    {
        "float64": 1e-15,
        "float32": 1e-6,
        "float16": 1e-3,
        "bfloat16": 1e-2,
        "float8_e3m4": 1e-1,
        "float8_e4m3": 1e-1,
        "float8_e4m3b11fnuz": 1e-1,
        "float8_e4m3fn": 1e-1,
        "float8_e4m3fnuz": 1e-1,
        "float8_e5m2": 1e-1,
        "float8_e5m2fnuz": 1e-1,
        "float8_e5m3fnu": 1e-1,
        "float8_e8m0fnu": 1.0,  # powers of two only: neighbours are a factor 2 apart
        "float6_e2m3fn": 1e-1,
        "float6_e3m2fn": 1e-1,
        "float4_e2m1fn": 1.0,
        "complex128": 1e-15,
        "complex64": 1e-6,
        **dict.fromkeys(("bool", "int8", "int16", "int32", "int64"), 0.0),
        **dict.fromkeys(("uint8", "uint16", "uint32", "uint64"), 0.0),
        **dict.fromkeys(("int1", "int2", "int4", "uint1", "uint2", "uint4"), 0.0),
    }
)

# How far off (in ulp) rounding alone plausibly puts an element: beyond it a looser tolerance
# is not what a failure calls for.
ROUNDING_ULP = 8

# A tolerance as judged: one for every element, or an array of them broadcasting against the leaf.
Bound = float | np.ndarray


def is_integer(dtype: np.dtype) -> bool:
    """An integer type: NumPy's, or one of ml_dtypes' narrow ones (int4, uint2, ...)."""
    return dtype.kind in "iu" or (dtype.kind == "V" and dtype.name.startswith(("int", "uint")))


def default_tolerance(dtype: np.dtype) -> float | None:
    """The dtype's default ``rtol`` and ``atol`` (``DEFAULT_TOLERANCES``); None if it has none."""
    return DEFAULT_TOLERANCES.get(dtype.name)


def checked(name: str, value: object, *, allow_none: bool = False) -> float | None:
    """``value`` as a float, or a ``TypeError`` naming the argument: a tolerance is a finite number >= 0."""
    if value is None and allow_none:
        return None
    number = None
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        number = float(value)
    if number is None or not math.isfinite(number) or number < 0:
        also = " or None (the dtype's default)" if allow_none else ""
        raise TypeError(f"{name}={value!r} must be a finite float >= 0{also}")
    return number


def is_bound_leaf(value: object) -> bool:
    """A tolerance that stands for one leaf (or a whole subtree): a number, an array or None."""
    return (
        value is None
        or isinstance(value, (int, float, np.integer, np.floating, np.ndarray))
        or (hasattr(value, "shape") and hasattr(value, "dtype"))
    )


def checked_bound(name: str, value: object, shape: tuple[int, ...]) -> float | np.ndarray | None:
    """A tolerance for one leaf of ``shape``: None (the dtype's default), a finite float >= 0, or
    an array of them that broadcasts against the leaf; else a ``TypeError`` naming ``name``."""
    if value is None or not hasattr(value, "shape") or not np.shape(value):
        return checked(name, value.item() if isinstance(value, np.ndarray) else value, allow_none=True)
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} is an array of {array.dtype}: a tolerance array holds floats >= 0")
    bound = array.astype(np.float64)
    if not (np.isfinite(bound) & (bound >= 0)).all():
        bad = tuple(int(i) for i in np.argwhere(~(np.isfinite(bound) & (bound >= 0)))[0])
        raise TypeError(f"{name}{list(bad)} = {float(bound[bad])!r}: every bound must be a finite float >= 0")
    try:
        fits = np.broadcast_shapes(bound.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise TypeError(
            f"{name} has shape {bound.shape}, which does not broadcast against the leaf's shape "
            f"{tuple(shape)} (a bound per row of an (n, d) leaf has shape (n, 1))"
        )
    return bound


# ---------------------------------------------------------------------------
# Closeness


@dataclass(frozen=True)
class Verdict:
    """Element-wise, against the closest candidate: whether it passes, its absolute error, the
    error allowed there, and which candidate was closest."""

    ok: np.ndarray
    error: np.ndarray  # float64; inf where a NaN or an infinity does not match
    allowed: np.ndarray  # float64
    candidate: np.ndarray  # int: index into the candidates

    @property
    def score(self) -> np.ndarray:
        """How far out each element is: error / allowed (inf where nothing is allowed)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = self.error / self.allowed
        return np.where(self.error == 0, 0.0, np.nan_to_num(ratio, nan=np.inf, posinf=np.inf))


def _wide(a: np.ndarray) -> np.ndarray:
    """Real floats in float64 (exact for every narrower float), or as they are if wider."""
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:
        return a
    with np.errstate(invalid="ignore", over="ignore"):  # NaN payloads of narrow types warn
        return a.astype(np.float64)


def _tiny(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).smallest_normal)


def _flushed(g: np.ndarray, w: np.ndarray, tiny: float) -> np.ndarray:
    """``g`` with each zero that stands for a subnormal ``w`` of the same sign replaced by ``w``."""
    with np.errstate(invalid="ignore"):
        hit = (w != 0) & (np.abs(w) < tiny) & (g == 0) & (np.signbit(g) == np.signbit(w))
    return np.where(hit, w, g)


def _real(
    g: np.ndarray, w: np.ndarray, rtol: Bound, atol: Bound
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, error, allowed) for real values with the NaN and infinity rules."""
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(g - w).astype(np.float64)
        allowed = (atol + rtol * np.abs(w)).astype(np.float64)
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        special = nan_g | nan_w | np.isinf(g) | np.isinf(w)
        same_special = (nan_g & nan_w) | (special & (g == w))
        ok = np.where(special, same_special, error <= allowed)
        error = np.where(special, np.where(same_special, 0.0, np.inf), error)
    return ok, error, allowed


def _complex(
    g: np.ndarray, w: np.ndarray, rtol: Bound, atol: Bound, tiny: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = []
    for c in ("real", "imag"):
        gc, wc = _wide(getattr(g, c).copy()), _wide(getattr(w, c).copy())
        parts.append((gc if tiny is None else _flushed(gc, wc, tiny), wc))
    (gr, wr), (gi, wi) = parts
    finite = np.isfinite(gr) & np.isfinite(gi) & np.isfinite(wr) & np.isfinite(wi)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.hypot(gr - wr, gi - wi)
        allowed = atol + rtol * np.hypot(wr, wi)
        ok = error <= allowed
    if not finite.all():
        ok_r, error_r, allowed_r = _real(gr, wr, rtol, atol)
        ok_i, error_i, allowed_i = _real(gi, wi, rtol, atol)
        ok = np.where(finite, ok, ok_r & ok_i)
        error = np.where(finite, error, np.maximum(error_r, error_i))
        allowed = np.where(finite, allowed, np.minimum(allowed_r, allowed_i))
    return ok, error, allowed


def _integers(
    g: np.ndarray, w: np.ndarray, rtol: Bound, atol: Bound
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact difference, as uint64 (no overflow: the smaller is taken from the larger)."""
    if g.dtype.kind not in "iu":  # bool and ml_dtypes' narrow integers
        g, w = g.astype(np.int64), w.astype(np.int64)
    difference = _apart(g, w)
    error = difference.astype(np.float64)
    allowed = atol + rtol * np.abs(w.astype(np.float64))
    ok = (difference == 0) | (error <= allowed)
    return ok, error, allowed


def judge(got: np.ndarray, candidates: list[np.ndarray], *, rtol: Bound, atol: Bound, flush: bool) -> Verdict:
    """The closeness rule (module docstring) against each candidate; each element is judged against
    the candidate it comes closest to.  All arrays share one dtype and shape; ``rtol`` and ``atol``
    broadcast against it."""
    best: Verdict | None = None
    for k, want in enumerate(candidates):
        dtype = want.dtype
        if dtype.kind == "c":
            tiny = _tiny(np.dtype(want.real.dtype)) if flush else None
            ok, error, allowed = _complex(got, want, rtol, atol, tiny)
        elif is_float(dtype):
            g, w = _wide(got), _wide(want)
            if flush:
                g = _flushed(g, w, _tiny(dtype))
            ok, error, allowed = _real(g, w, rtol, atol)
        elif is_integer(dtype) or dtype.kind == "b":
            ok, error, allowed = _integers(got, want, rtol, atol)
        else:  # strings, objects: equal or not
            ok = np.asarray(got == want, dtype=bool)
            error = np.where(ok, 0.0, np.inf)
            allowed = np.zeros(ok.shape)
        allowed = np.broadcast_to(allowed, ok.shape)
        verdict = Verdict(ok, error, allowed, np.full(ok.shape, k))
        if best is None:
            best = verdict
            continue
        better = ~best.ok & (ok | (verdict.score < best.score))
        best = Verdict(
            best.ok | ok,
            np.where(better, error, best.error),
            np.where(better, allowed, best.allowed),
            np.where(better, k, best.candidate),
        )
    assert best is not None
    return best


# ---------------------------------------------------------------------------
# ulp distances


@cache
def _byte_float_values(dtype: np.dtype) -> np.ndarray:
    """Every value of a one-byte float type, sorted, NaN left out and -0 merged with +0."""
    with np.errstate(invalid="ignore"):
        values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(values[~np.isnan(values)])


def _order(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each float's position among its type's values (int64), and where it is NaN: the ulp
    distance of two values is the difference of their positions."""
    dtype = a.dtype
    nan = np.isnan(_wide(a))
    if dtype.itemsize == 1:
        values = _byte_float_values(dtype)
        return np.searchsorted(values, np.where(nan, 0.0, _wide(a))).astype(np.int64), nan
    unsigned = np.ascontiguousarray(a).view(f"u{dtype.itemsize}").astype(np.uint64)
    sign_bit = np.uint64(1) << np.uint64(8 * dtype.itemsize - 1)
    magnitude = (unsigned & ~sign_bit).astype(np.int64)  # below 2**63: fits
    return np.where(unsigned & sign_bit, -magnitude, magnitude), nan


def _apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` of two int64 arrays, exact as uint64 (the smaller taken from the larger)."""
    with np.errstate(over="ignore"):
        au, bu = a.astype(np.uint64), b.astype(np.uint64)  # wraps modulo 2**64
        return np.where(a >= b, au - bu, bu - au)


def ulp_distances(got: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """Element-wise distance between ``got`` and ``want`` in representable values of their dtype
    (float64; NaN where a NaN is involved): for complex numbers the larger of the components', for
    integers their difference.  None for a dtype without one (wider floats, strings)."""
    dtype = want.dtype
    if dtype.kind == "c":
        parts = [ulp_distances(getattr(got, c).copy(), getattr(want, c).copy()) for c in ("real", "imag")]
        if parts[0] is None or parts[1] is None:
            return None
        return np.maximum(parts[0], parts[1])
    if is_float(dtype):
        if dtype.itemsize > 8:
            return None
        (g, g_nan), (w, w_nan) = _order(got), _order(want)
        return np.where(g_nan | w_nan, np.nan, _apart(g, w).astype(np.float64))
    if is_integer(dtype) or dtype.kind == "b":
        return _integers(got, want, 0.0, 0.0)[1]
    return None


def show_ulp(distance: float) -> str:
    if math.isnan(distance):
        return "no ulp distance (NaN)"
    if math.isinf(distance):
        return "an infinite ulp distance"
    return f"{int(distance)} ulp"
