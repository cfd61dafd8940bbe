"""The registry of checks: each has a stable ID, a title and its contracts.

IDs never change once released: CI configurations, ``--xfail-file`` lines
and reports refer to them.  A check is a function ``body(kit, case)`` that
raises ``CheckFailure`` when the implementation breaks the contract, and
its input domain (domains.py: what it draws, which earlier inputs it may
judge too, the cells it covers; ``None`` for checks that run once).  Gate
checks run first; when a gate fails, the checks behind it are skipped
instead of repeating the same failure many times.

A check may need the function to be given a mesh (``needs_mesh``: the full
contract gives one, the seed contract's function takes none) and several
devices (``min_devices``, where the function is given a mesh: without one, a
contract is one device by definition).  On fewer it is "not
applicable: needs N devices"; ``not_applicable`` is the one place that says so
(``Kit.run_check`` asks it before anything runs, and a check's strategy,
built by anyone else, refuses too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from conformance._src.contract.domains import Domain
    from conformance._src.declared.contract import Contract
    from conformance._src.inputs.case import Case


class CheckFailure(AssertionError):
    """The implementation broke the contract; the message is for its author."""


def failure_in(group: BaseExceptionGroup[Any]) -> CheckFailure | None:
    """The first check failure inside Hypothesis's exception group (a ``FlakyFailure``: the failing
    example passed when replayed, because the function's state left by the examples before it
    changed the outcome).  The failure stands: its block says what came, and its rerun line
    replays it in a fresh process where a token can say it."""
    found = group.subgroup(lambda e: isinstance(e, CheckFailure))
    if found is None:
        return None
    first: BaseException = found
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, CheckFailure)
    return first


class KitError(Exception):
    """The kit itself could not judge the check (a process of its own failed): the check's status
    is "kit error", never a claim about the implementation."""


class Inconclusive(Exception):
    """The check could not decide (it is reported as skipped, never as a pass)."""


class NotApplicable(Exception):
    """The check has nothing to judge in this contract (the message says why): a skip."""


class Refused(Exception):
    """The implementation refused an input it may refuse (case.may_refuse): nothing to judge."""


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    needs_mesh: bool  # judges only a function that is given a mesh (not the seed contract's)
    body: Callable[[Any, Any], Any]  # (kit, a Case, a history token for history checks, or None)
    domain: Domain | None  # None: the check makes its own calls, once
    gate: bool = False
    examples: float = 1.0  # share of the profile's max_examples this check draws
    min_devices: int = 1  # under the full contract; the seed contract is one device
    needs: tuple[str, ...] = ()  # the self-test's probes (selftest.PROBES) its verdict rests on
    history: bool = False  # searches histories of calls itself (history.py); --case is a history token
    declared: bool = False  # a check of declared contracts (conformance.contracts), run by their engine
    needs_raises: bool = False  # judges the error the contract ``raises`` (none: not applicable)
    # Which run has it (options.run_part): "" every run; "accelerator": the forced-CPU process of
    # an accelerator run (it waits for the chips' part); "chip": that part, chips and CPU devices
    # in one process.  Such a check is written over any contract.
    part: str = ""

    def devices_needed(self, contract: Contract) -> int:
        if self.part:  # judged on whatever devices the part has
            return 1
        if self.declared:  # a check over any declaration judges a sharded function
            return max(2, self.min_devices)
        return self.min_devices if contract.takes_mesh else 1

    def applies(self, contract: Contract) -> bool:
        """Whether the contract declares what the check needs: its form (the one-vector form's
        checks, or those written over any declaration), a mesh given, an error."""
        one_vector = contract.one_vector() is None
        return (
            (bool(self.part) or one_vector != self.declared)
            and (contract.takes_mesh or not self.needs_mesh)
            and (contract.raises is not None or not self.needs_raises)
        )

    @property
    def contract_names(self) -> list[str]:
        """The names of pjit_double's contracts (seed, full) it judges, for the report."""
        return ["full"] if self.needs_mesh else ["full", "seed"]

    def strategy(self, contract: Contract) -> SearchStrategy[Case]:
        """The domain's strategy; not applicable (a skip) where the devices are too few."""
        assert self.domain is not None, f"{self.id} draws no inputs"
        needs_devices(self.id, contract)  # before the strategy asks for meshes there are no devices for
        return self.domain.draw(contract)


CHECKS: dict[str, Check] = {}


def check(
    id: str,
    title: str,
    *,
    needs_mesh: bool = False,
    domain: Domain | None = None,
    gate: bool = False,
    examples: float = 1.0,
    min_devices: int = 1,
    needs: tuple[str, ...] = (),
    history: bool = False,
    declared: bool = False,
    needs_raises: bool = False,
    part: str = "",
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``body`` under ``id`` (in definition order: gates come first)."""
    if min_devices > 1 and gate:
        raise ValueError(f"gate check {id!r} must run on one device")

    def register(body: Callable[..., Any]) -> Callable[..., Any]:
        if id in CHECKS:
            raise ValueError(f"check ID {id!r} registered twice")
        CHECKS[id] = Check(
            id,
            title,
            needs_mesh,
            body,
            domain,
            gate,
            examples,
            min_devices,
            needs,
            history,
            declared,
            needs_raises,
            part,
        )
        return body

    return register


def not_applicable(check_id: str, contract: Contract) -> str | None:
    """Why the check cannot run here, if it cannot: the contract leaves it out, or too few devices."""
    check = CHECKS[check_id]
    if not check.applies(contract):
        return f"not applicable: {check_id} is not in the {contract.name} contract"
    import jax  # the backend is up by the time a check runs

    needed = check.devices_needed(contract)
    available = len(jax.devices())
    if available < needed and check.declared:
        return f"not applicable: a sharded function needs {needed} or more devices (--devices)"
    if available < needed:
        return f"not applicable: needs {needed} devices, {available} available (--devices)"
    return None


def needs_devices(check_id: str, contract: Contract) -> None:
    """Skip the check as not applicable if it needs more devices than there are."""
    reason = not_applicable(check_id, contract)
    if reason is not None:
        pytest.skip(reason)


def ids_for(declared: bool, part: str = "") -> list[str]:
    """The checks of a run: ``pjit_double``'s (seed and full), or those of a declared contract;
    with the ``part`` of an accelerator run's (options.run_part) its own check."""
    return [c.id for c in CHECKS.values() if (c.part == part if c.part else c.declared == declared)]


def run_order(declared: bool, part: str = "") -> list[str]:
    """``ids_for`` in the order they run: a declared contract's history checks first, while the
    function's caches hold nothing the kit's other checks left there, so that a failing history
    replayed in a fresh process (``--case``) starts from the state it started from."""
    ids = ids_for(declared, part)
    return sorted(ids, key=lambda i: not (declared and CHECKS[i].history))


def gates_for(contract: Contract) -> list[Check]:
    return [c for c in CHECKS.values() if c.gate and c.applies(contract)]
