"""Hypothesis for one check: the profiles' settings, each check's own database keys and seed.

The covering schedule (schedule.py) gives every cell its input first; Hypothesis then draws
more, and shrinks a failure to the smallest input it finds.  ``run_given`` runs a body under
``@given`` named after the check: with a profile that fixes the seed (``ci``) or in a
``--distributed`` run, a seed of the check's own, so that checks do not all draw alike.  In a
``--distributed`` run, ``agreed`` gives every process one example's verdict, for both engines.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis.database import ExampleDatabase

from conformance._src.calling.calls import ImplementationHung
from conformance._src.calling.distributed import FAILED, HUNG, OK, Cluster
from conformance._src.contract.catalogue import Check, CheckFailure
from conformance._src.inputs.case import Case

# Compiles make examples slow and uneven: no deadline, no too_slow health check.
_QUIET = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
    HealthCheck.large_base_example,
]
PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(max_examples=16, deadline=None, suppress_health_check=_QUIET),
    "ci": dict(
        max_examples=16,
        deadline=None,
        suppress_health_check=_QUIET,
        derandomize=True,
        database=None,
        print_blob=True,
    ),
    "thorough": dict(max_examples=150, deadline=None, suppress_health_check=_QUIET),
}
SHRINK_EXAMPLES = 30  # Hypothesis's examples, in one cell, to find and shrink a failure the schedule found
# How long Hypothesis may shrink a failing history of calls (state.histories), per profile: each
# try replays a history, compiles and all, so a try costs up to seconds, not microseconds.
SHRINK_SECONDS = {"default": 30.0, "ci": 60.0, "thorough": 120.0}


class _CheckDatabase(ExampleDatabase):
    """Another database seen through one check's own keys: each check keeps its own examples."""

    def __init__(self, inner: ExampleDatabase, check_id: str) -> None:
        super().__init__()
        self.inner, self.prefix = inner, check_id.encode() + b"\0"

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterator[bytes]:
        return iter(self.inner.fetch(self.prefix + key))

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)


def hypothesis_options(profile: str, check: Check, *, cluster: bool) -> dict[str, Any]:
    """Hypothesis's settings for ``check`` under ``profile``: its example count, its own database keys."""
    options = dict(PROFILES.get(profile, PROFILES["default"]))
    options["max_examples"] = max(1, round(options["max_examples"] * check.examples))
    # One failure per check, the smallest: a verdict is one record, and an
    # ExceptionGroup of several would hide the kit's message block.
    options["report_multiple_bugs"] = False
    if cluster:  # every process must draw the same examples
        options.update(derandomize=True, database=None)
    database = options.get("database", getattr(settings.default, "database", None))
    if database is not None:
        options["database"] = _CheckDatabase(database, check.id)
    return options


def run_given(
    check: Check, strategy: Any, options: dict[str, Any], body: Callable[[Case], None], *, cluster: bool
) -> None:
    """Run ``body`` under Hypothesis, named after the check, with the check's own seed where fixed."""
    body.__name__ = body.__qualname__ = check.id.replace(".", "_").replace("-", "_")
    # A fixed seed of the check's own where the profile fixes one: derandomize would seed
    # every check alike (Hypothesis seeds it from the function's source, which all share).
    fixed = bool(options.pop("derandomize", False)) or cluster
    test = given(strategy)(settings(**options)(body))
    if fixed:
        test = seed(zlib.crc32(check.id.encode()))(test)
    test()


def agreed(cluster: Cluster, check_id: str, local: BaseException | None, where: str) -> BaseException | None:
    """What every process raises for one example, once all of them have given their verdict on it
    (``local``: this process's failure, if it failed); ``None`` when every process passed.

    A new exception, of the same type on every process and raised by the caller from one line:
    so Hypothesis sees the same failure everywhere and stays in lockstep, shrinking included.
    ``where`` names the input for the message of a process that passed while another failed.
    """
    verdict = HUNG if isinstance(local, ImplementationHung) else FAILED if local is not None else OK
    verdicts = cluster.agree(verdict)
    if max(verdicts) == OK:
        return None
    others = [rank for rank, v in enumerate(verdicts) if v != OK and rank != cluster.process_id]
    at = f"on process(es) {others}" + (f" for input {where}" if where else "")
    if max(verdicts) == HUNG:
        if isinstance(local, ImplementationHung):
            return ImplementationHung(str(local))
        return ImplementationHung(
            f"[{check_id}] a call of the implementation hung {at}; no process calls it again "
            f"(see that process's output)"
        )
    if local is not None:
        return CheckFailure(str(local))
    return CheckFailure(
        f"[{check_id}] the check failed {at}: its shards of the result broke the contract there "
        f"(see that process's output)"
    )
