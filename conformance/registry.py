"""The registry of checks: each has a stable ID, a title and its contracts.

IDs never change once released: CI configurations, ``--xfail-file`` lines
and reports refer to them.  A check is a function ``body(kit, case)`` that
raises ``CheckFailure`` when the implementation breaks the contract, and a
strategy that draws its cases (``None`` for checks that run once), and
which earlier checks' examples it may judge too (``reuse``).  Gate
checks run first; when a gate fails, the checks behind it are skipped
instead of repeating the same failure many times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from conformance.contract import Contract

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from conformance.case import Case

BOTH = frozenset({Contract.SEED, Contract.FULL})
FULL_ONLY = frozenset({Contract.FULL})


class CheckFailure(AssertionError):
    """The implementation broke the contract; the message is for its author."""


class Inconclusive(Exception):
    """The check could not decide (it is reported as skipped, never as a pass)."""


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    contracts: frozenset[Contract]
    body: Callable[[Any, Case | None], None]
    strategy: Callable[[Contract], SearchStrategy[Any]] | None
    gate: bool = False
    examples: float = 1.0  # share of the profile's max_examples this check draws
    # Which examples of earlier checks this one may draw as well (see pool.py).
    reuse: Callable[[Any, Contract], bool] | None = None


CHECKS: dict[str, Check] = {}


def check(
    id: str,
    title: str,
    *,
    contracts: frozenset[Contract] = BOTH,
    strategy: Callable[[Contract], SearchStrategy[Any]] | None = None,
    gate: bool = False,
    examples: float = 1.0,
    reuse: Callable[[Any, Contract], bool] | None = None,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register ``body`` under ``id`` (in definition order: gates come first)."""

    def register(body: Callable[..., None]) -> Callable[..., None]:
        if id in CHECKS:
            raise ValueError(f"check ID {id!r} registered twice")
        CHECKS[id] = Check(id, title, contracts, body, strategy, gate, examples, reuse)
        return body

    return register


def gates_for(contract: Contract) -> list[Check]:
    return [c for c in CHECKS.values() if c.gate and contract in c.contracts]
