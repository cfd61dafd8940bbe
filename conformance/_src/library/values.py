"""Values on the host, dtype by dtype: what a float is, the bit-for-bit comparison rule, XLA's
flushing of subnormals, and a value as a person reads it.

The rule of ``values_match`` (``assertions.assert_values_equal``): the same bits, except that
any NaN matches any NaN and (with ``flush``) a zero of the same sign matches a subnormal, as
XLA on CPU flushes them.  Everything here is NumPy on host data; the kit's value oracle
(contract/oracle.py) builds on it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# Past this many elements (a prime) ``strategies.values`` repeats a block of this many drawn ones
# (``strategies.background``): a long vector costs little to make, its ``--case`` token stays
# short (inputs/case.py), and no power-of-two chunk of it looks like another.
TILE = 509


def _float_info(dtype: np.dtype) -> tuple[float, np.dtype]:
    """Smallest normal and the unsigned type of the same width, for bit views."""
    if dtype.kind == "V":  # bfloat16 and the float8 kinds (ml_dtypes)
        tiny = float(ml_dtypes.finfo(dtype).smallest_normal)
    else:
        tiny = float(np.finfo(dtype).smallest_normal)
    return tiny, np.dtype(f"u{dtype.itemsize}")


def is_float(dtype: np.dtype) -> bool:
    """NumPy's floats, and ml_dtypes' (bfloat16, the float8 kinds): every one ``ml_dtypes.finfo`` knows."""
    if dtype.kind == "f":
        return True
    if dtype.kind != "V":
        return False
    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return False
    return True


def _float_ok(got: np.ndarray, want: np.ndarray, flush: bool = True) -> np.ndarray:
    """Element-wise verdict for real floats of one dtype: the same bits, both NaN, or (``flush``)
    a zero of the right sign where ``want`` is subnormal."""
    tiny, unsigned = _float_info(want.dtype)
    same_bits = want.view(unsigned) == got.view(unsigned)
    with np.errstate(invalid="ignore"):  # casting NaN payloads of narrow types warns
        want64, got64 = (a.astype(np.float64) for a in (want, got))
    both_nan = np.isnan(want64) & np.isnan(got64)
    if not flush:
        return same_bits | both_nan
    subnormal = (want64 != 0) & (np.abs(want64) < tiny)
    flushed = subnormal & (got64 == 0) & (np.signbit(got64) == np.signbit(want64))
    return same_bits | both_nan | flushed


def values_match(got: np.ndarray, wants: list[np.ndarray], *, flush: bool = True) -> np.ndarray:
    """Boolean mask: which elements of ``got`` equal the element of one of ``wants``.

    Equal means bit for bit, except that any NaN matches any NaN and (with
    ``flush``) a zero of the same sign matches a subnormal, as XLA on CPU
    flushes them.  Complex elements match when both components match the same
    one of ``wants``.  ``got`` and every one of ``wants`` share one dtype and shape.
    """
    verdict = np.zeros(got.shape, dtype=bool)
    for want in wants:
        if got.dtype.kind == "c":
            parts = [
                _float_ok(getattr(got, c).copy(), getattr(want, c).copy(), flush) for c in ("real", "imag")
            ]
            verdict |= parts[0] & parts[1]
        elif is_float(got.dtype):
            verdict |= _float_ok(got, want, flush)
        else:
            verdict |= got == want
    return verdict


def _flush(part: np.ndarray) -> np.ndarray:
    """Subnormals to zero of the same sign, as XLA on CPU treats its inputs."""
    tiny, _ = _float_info(part.dtype)
    return np.where(np.abs(part) < tiny, np.copysign(np.zeros_like(part), part), part)


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """``x`` with every subnormal float (or complex component) made a zero of the same sign.

    What XLA on CPU does to its inputs: compute an expected result from it
    too where an input may be subnormal (``assertions.assert_values_equal``'s
    ``alternatives``).  Other dtypes come back unchanged.
    """
    x = np.asarray(x)
    if x.dtype.kind == "c":
        out = np.empty_like(x)
        out.real, out.imag = _flush(x.real.copy()), _flush(x.imag.copy())
        return out
    return _flush(x) if is_float(x.dtype) else x.copy()


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold the same bytes in C order (dtype and shape aside), compared
    eight at a time: a vector past 32 MiB costs a pass over its bytes, no copy per element."""
    a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    if a.size != b.size:
        return False
    cut = a.size - a.size % 8
    return bool(
        np.array_equal(a[:cut].view(np.uint64), b[:cut].view(np.uint64)) and np.array_equal(a[cut:], b[cut:])
    )


def tile_edits(values: np.ndarray, block: np.ndarray) -> np.ndarray:
    """The indices where 1-D ``values`` differ in their bits from ``block`` repeated (``np.resize``):
    where ``strategies.values`` wrote over a long vector's block of ``TILE``.  Compared a word of
    up to eight bytes at a time, the block broadcast, not copied: cheap past 32 MiB."""
    n, t, size = len(values), len(block), values.dtype.itemsize
    if not n or not t:
        return np.arange(n)
    a = np.ascontiguousarray(values).view(np.uint8).reshape(n, size)
    b = np.ascontiguousarray(block).view(np.uint8).reshape(t, size)
    word = next(w for w in (8, 4, 2, 1) if size % w == 0)
    a, b = a.view(f"u{word}"), b.view(f"u{word}")
    if a.shape[1] == 1:
        a, b = a[:, 0], b[:, 0]
    whole = n // t * t
    differs = np.empty(n, dtype=bool)
    head = a[:whole].reshape(whole // t, *b.shape) != b
    tail = a[whole:] != b[: n - whole]
    if a.ndim == 2:
        head, tail = head.any(axis=-1), tail.any(axis=-1)
    differs[:whole], differs[whole:] = head.reshape(-1), tail
    return np.flatnonzero(differs)


def bits(a: np.ndarray) -> np.ndarray:
    """Each element's bytes, shape ``(*a.shape, itemsize)``: NaNs and zero signs compare exactly."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape(a.shape + (a.dtype.itemsize,))


def show(value: np.generic) -> str:
    """A value as a person wants to read it: floats with their hex bits."""
    dtype = np.asarray(value).dtype
    if dtype.kind == "c":
        return f"complex({show(value.real)}, {show(value.imag)})"
    if is_float(dtype):
        bits = np.asarray(value).view(f"u{dtype.itemsize}")
        return f"{float(value)!r} (0x{int(bits):0{2 * dtype.itemsize}x})"
    return repr(int(value))
