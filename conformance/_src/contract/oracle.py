"""The value oracle: what a correct function of the one-vector form returns, element by element.

A contract's ``oracle`` gives the expected result and its ``accept`` the other results a
correct function may give (``None`` where one adds nothing); each is judged on the input and on
the input with its subnormals flushed, as XLA on CPU flushes them.  For ``pjit_double``
(declared/pjit_double.py):

Rules (SPEC.md, "Values"):
* integers wrap like NumPy's ``2 * x`` in the input's own dtype;
* floats equal the exact doubled value bit for bit (doubling is exact, so
  overflow gives +/-inf and the sign of zero is kept), except that any NaN
  matches any NaN, and where the input or the exact result is subnormal a zero
  of the same sign is accepted too: XLA on CPU flushes subnormals to zero and
  no flag turns that off;
* complex numbers are judged component by component, both components against
  the same one of the doublings: the components each doubled (of the input,
  or of the input with its subnormal components flushed, as XLA does), or
  IEEE complex multiplication by ``2+0j`` (which is what ``2 * x`` compiles
  to) of the input or of the flushed input.  They differ only in the sign of zero components
  (``re = 2a - 0*b``), NaN from inf components (``2 * (inf+0j)`` is
  ``inf+nanj``) and flushing; no other error passes.

The comparison itself (bits, NaN, flushed zeros) is ``values_match``
(library/values.py), the rule of the public ``assertions.assert_values_equal`` too.  Everything here is
NumPy on host data, so it can be tested without JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# The comparison rule and the value display are the library's (library/values.py): the oracle
# builds on them, and the kit's checks read them from here too.
from conformance._src.declared import pjit_double
from conformance._src.library.values import (
    TILE,
    bits,
    flush_subnormals,
    is_float,
    show,
    tile_edits,
    values_match,
)

if TYPE_CHECKING:
    from conformance._src.declared.contract import Contract

__all__ = [
    "Mismatch",
    "bits",
    "element_ok",
    "first_mismatch",
    "flush_subnormals",
    "is_float",
    "show",
    "values_match",
]


@dataclass(frozen=True)
class Mismatch:
    """The first element where the result breaks the oracle."""

    index: int
    input: str
    expected: str
    got: str
    count: int  # how many elements break the oracle in all


def wanted(x: np.ndarray, contract: Contract) -> list[np.ndarray]:
    """Every result ``contract`` accepts for ``x``: its oracle's and its ``accept``'s, of x and of
    x with its subnormals flushed."""
    flushed = flush_subnormals(x)
    wants = []
    for f in (contract.oracle, *contract.accept):
        for v in (x, flushed):
            with np.errstate(all="ignore"):
                want = f(v)
            if want is not None:
                wants.append(np.asarray(want))
    return wants


def expected(x: np.ndarray, contract: Contract | None) -> np.ndarray:
    """The oracle's result for ``x`` (``pjit_double``'s full contract's without a contract).

    A long float vector that is a block of ``TILE`` repeated with a few elements written over it
    (what ``strategies.values`` makes, past 32 MiB too) is doubled by construction: the block's
    doubles repeated, and those few doubled where they lie -- the same result, element by element,
    without the float arithmetic over every element (half floats are doubled in software).
    """
    full = _or_full(contract)
    if len(x) > 4 * TILE and x.dtype.kind in "fcV" and _elementwise(full):
        edits = tile_edits(x, x[:TILE])
        if len(edits) <= len(x) // 64:
            with np.errstate(all="ignore"):
                want = np.resize(np.asarray(full.oracle(x[:TILE])), len(x))
                if len(edits):
                    want[edits] = full.oracle(x[edits])
            return want
    with np.errstate(all="ignore"):
        return np.asarray(full.oracle(x))


def element_ok(x: np.ndarray, got: np.ndarray, contract: Contract | None = None) -> np.ndarray:
    """Boolean mask: which elements of ``got`` the oracle accepts for input ``x``.

    The public rule of ``values_match`` (``assertions.assert_values_equal``)
    against the results the contract accepts (``wanted``); without a contract, ``pjit_double``'s
    full one: the doublings of ``x`` and of ``x`` with its subnormals flushed, and for complex
    numbers XLA's product with ``2+0j``.
    """
    return values_match(got, wanted(x, _or_full(contract)))


def _or_full(contract: Contract | None) -> Contract:
    return pjit_double.full() if contract is None else contract


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean mask: which elements of ``a`` have ``b``'s bits (one dtype and shape), compared
    as unsigned words of the element's width: no per-byte copy of a long vector."""
    size = a.dtype.itemsize
    if size in (1, 2, 4, 8):
        word = np.dtype(f"u{size}")
        return np.ascontiguousarray(a).view(word) == np.ascontiguousarray(b).view(word)
    return (bits(a) == bits(b)).all(axis=-1)


def _subset_ok(x: np.ndarray, got: np.ndarray, contract: Contract) -> np.ndarray:
    """``element_ok`` for elements of an element-by-element contract: those with the bits of one
    of the results it accepts first, the rule's float64 copies for the rest (NaN payloads)."""
    wants = wanted(x, contract)
    ok = np.zeros(len(got), dtype=bool)
    for want in wants:
        if want.dtype == got.dtype and want.shape == got.shape:
            ok |= same_bits(got, want)
    rest = np.flatnonzero(~ok)
    if rest.size:
        ok[rest] = values_match(got[rest], [want[rest] for want in wants])
    return ok


def _elementwise(contract: Contract) -> bool:
    """Whether each element of the contract's results depends on that element of x alone:
    ``pjit_double``'s own oracle and its ``accept`` (a declared oracle may be anything)."""
    return contract.oracle is pjit_double.doubled and all(
        f is pjit_double.times_two_plus_0j for f in contract.accept
    )


def first_mismatch(
    x: np.ndarray, got: np.ndarray, contract: Contract | None = None, *, want: np.ndarray | None = None
) -> Mismatch | None:
    """Compare ``got`` with the doubled ``x``; ``None`` when every element passes.

    ``got`` must already have the input's dtype and shape: those are judged by
    checks of their own, so that each defect is named once.  (The oracle makes
    several copies of ``got``: a result of another size, which can be of any
    size, never gets here.)  ``want``: ``expected(x, contract)``, where the
    caller has it already.

    The elements with the bits of the oracle's result pass at once; where the
    oracle is element by element (``pjit_double``'s), only the others are
    judged by the whole rule (NaN payloads, flushed subnormals, the other
    doublings of complex numbers), so a vector past 32 MiB costs a
    comparison, not the rule's several float64 copies of it.
    """
    if got.shape != x.shape:
        raise ValueError(f"judge the shape first: the result has shape {got.shape}, the input {x.shape}")
    full = _or_full(contract)
    if want is None:
        want = expected(x, full)
    if want.dtype == got.dtype and want.shape == got.shape:
        differs = ~same_bits(got, want)
        if not differs.any():
            return None
        if _elementwise(full):
            where = np.flatnonzero(differs)
            del differs
            bad = where[~_subset_ok(x[where], got[where], full)]
            if bad.size == 0:
                return None
            i = int(bad[0])
            return Mismatch(i, show(x[i]), show(want[i]), show(got[i]), int(bad.size))
        del differs
    ok = element_ok(x, got, full)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    return Mismatch(i, show(x[i]), show(np.asarray(want)[i]), show(got[i]), int(bad.size))
