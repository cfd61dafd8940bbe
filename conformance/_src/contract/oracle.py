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
from conformance._src.library.values import bits, flush_subnormals, is_float, show, values_match

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
    """The oracle's result for ``x`` (``pjit_double``'s full contract's without a contract)."""
    with np.errstate(all="ignore"):
        return np.asarray(_or_full(contract).oracle(x))


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


def first_mismatch(x: np.ndarray, got: np.ndarray, contract: Contract | None = None) -> Mismatch | None:
    """Compare ``got`` with the doubled ``x``; ``None`` when every element passes.

    ``got`` must already have the input's dtype and shape: those are judged by
    checks of their own, so that each defect is named once.  (The oracle makes
    several copies of ``got``: a result of another size, which can be of any
    size, never gets here.)
    """
    if got.shape != x.shape:
        raise ValueError(f"judge the shape first: the result has shape {got.shape}, the input {x.shape}")
    ok = element_ok(x, got, contract)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    return Mismatch(i, show(x[i]), show(expected(x, contract)[i]), show(got[i]), int(bad.size))
