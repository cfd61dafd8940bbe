"""The verdict record: what one check concluded, and what the whole run concluded.

A check's verdict is one ``CheckVerdict`` with an explicit ``Status``.  The
kit sets the status where it decides it (kit.py); the supervisor sets it for
a check whose process died or hung (supervise.py); the plug-in carries the
record from a pytest-xdist worker to the controller as a plain dict
(``to_dict``/``from_dict``) and the report prints it.  Nothing reads a
status back from message text.

The run's verdict (``RunVerdict``) follows from the checks' records and
from whether every check of the contract reached one:

* ``NOT_CONFORMING`` -- a check failed or crashed (or a listed xfail passed);
* ``KIT_ERROR`` -- none failed, but the kit could not judge some check on the
  installed versions (a probe of ``selftest.self_test`` failed);
* ``PARTIAL`` -- none failed, but the whole contract was not judged: some
  check of the contract has no verdict (the run was interrupted, ``--check``
  chose a subset, ``--case`` replayed one example, a check was not run), or
  some check left part of its domain out (``CheckVerdict.left_out``: too few
  devices for a check or for some of its meshes, an inconclusive check, a
  cell no input was judged in);
* ``CONFORMING`` -- every check of the contract passed (or xfailed as listed)
  over its whole domain, or is not in the run's contract.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields
from typing import Any


class Status(str, enum.Enum):  # noqa: UP042 -- str() and format() as they have always been
    PASSED = "passed"
    FAILED = "failed"
    CRASHED = "crashed"  # the process running the implementation ended or was killed
    INCONCLUSIVE = "inconclusive"
    XFAILED = "xfailed"  # failed, and listed in --xfail-file
    NOT_APPLICABLE = "not applicable"
    NOT_RUN = "not run"
    PARTIAL = "partial"  # started, but the run ended before the check did
    KIT_ERROR = "kit error"  # the kit cannot judge it on the installed versions (selftest.self_test)


# A check with one of these statuses reached a verdict.
REACHED = frozenset(
    {Status.PASSED, Status.FAILED, Status.CRASHED, Status.INCONCLUSIVE, Status.XFAILED, Status.NOT_APPLICABLE}
)
BROKEN = frozenset({Status.FAILED, Status.CRASHED})


class RunVerdict(str, enum.Enum):  # noqa: UP042 -- str() and format() as they have always been
    CONFORMING = "conforming"
    NOT_CONFORMING = "not conforming"
    PARTIAL = "partial"
    KIT_ERROR = "kit error"

    @property
    def exit_status(self) -> int:
        """0 conforming, 1 not conforming, 2 partial (pytest's 'interrupted'), 3 kit error (pytest's
        'internal error')."""
        return {
            RunVerdict.CONFORMING: 0,
            RunVerdict.NOT_CONFORMING: 1,
            RunVerdict.PARTIAL: 2,
            RunVerdict.KIT_ERROR: 3,
        }[self]

    @property
    def headline(self) -> str:
        return self.value.upper()


@dataclass
class CheckVerdict:
    """One check's verdict and what it cost."""

    id: str
    status: Status = Status.NOT_RUN
    message: str = ""  # why: the failure block, the skip reason, what ended the process
    counterexample: str | None = None
    examples: int = 0
    reused: int = 0  # of the examples, those drawn from earlier checks' (see pool.py)
    seconds: float = 0.0
    calls: int = 0  # calls of the implementation made by this check
    compiles: int = 0  # backend compiles during those calls
    seconds_in_impl: float = 0.0
    xfail_reason: str | None = None  # the --xfail-file reason, when the check is listed
    # Coverage (coverage.py): inputs judged per cell ("dtype / placement / mesh / length"),
    # the cells of the check's domain, the schedule's inputs, and the cells left unvisited.
    coverage: dict[str, int] = field(default_factory=dict)
    cells: int = 0
    scheduled: int = 0
    unvisited: list[str] = field(default_factory=list)
    # Known bugs of the installed JAX (jax_bugs.py): the inputs they kept from being judged, per bug,
    # and the cells where no input could be judged for that reason.
    known_bugs: dict[str, int] = field(default_factory=dict)
    not_judged: list[str] = field(default_factory=list)
    # Inputs judged per mesh class value ("data size: odd", "order: subset", ...; coverage.MeshClass),
    # and per pair of axes of which one is a mesh class's ("dtype x data size"): [covered, possible].
    mesh_classes: dict[str, int] = field(default_factory=dict)
    pairs: dict[str, list[int]] = field(default_factory=dict)
    # Histories of calls (history.py): what the search reached (histories, steps, revisits, ...).
    histories: dict[str, int] = field(default_factory=dict)
    # The placement classes of the x's that really reached the implementation in this check's calls,
    # in this process (coverage.arrived_kind): across processes an input may be made otherwise.
    arrived: dict[str, int] = field(default_factory=dict)
    # Lengths by octave (schedule.Schedule.octave_cases): inputs judged per octave "2^k".
    octaves: dict[str, int] = field(default_factory=dict)
    # Long lengths by tier and dtype (coverage.TIERS, coverage.tier_of), in the shared pass:
    # inputs judged per "tier: dtype" ("32 MiB: int8").
    tiers: dict[str, int] = field(default_factory=dict)
    # What of the check's domain this run did not judge, and why, one line each (too few devices for
    # the check or for some of its meshes, inconclusive, cells no input was judged in).  Any line
    # makes the run PARTIAL: exit 0 says the whole contract was judged.
    left_out: list[str] = field(default_factory=list)
    # An accelerator run's platform.chips: each check's status in the chips' part (calling/chips.py).
    where: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckVerdict:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["status"] = Status(values.get("status", Status.NOT_RUN.value))
        return cls(**values)


def with_xfail(verdict: CheckVerdict, xfails: dict[str, str]) -> CheckVerdict:
    """Apply --xfail-file: a listed failure is expected; a listed pass fails (the file must not go stale)."""
    reason = xfails.get(verdict.id)
    if reason is None:
        return verdict
    verdict.xfail_reason = reason
    if verdict.status is Status.FAILED:
        verdict.status = Status.XFAILED
    elif verdict.status is Status.PASSED:
        verdict.status = Status.FAILED
        verdict.message = (
            f"[{verdict.id}] passed, but --xfail-file lists it as expected to fail ({reason}); "
            f"remove its line from the file"
        )
    return verdict


def run_verdict(verdicts: list[CheckVerdict], expected: list[str]) -> RunVerdict:
    """The run's verdict from the checks' ``verdicts``; ``expected``: every check of the contract."""
    if any(v.status in BROKEN for v in verdicts):
        return RunVerdict.NOT_CONFORMING
    if any(v.status is Status.KIT_ERROR for v in verdicts):
        return RunVerdict.KIT_ERROR
    reached = {v.id for v in verdicts if v.status in REACHED}
    if not expected or any(check_id not in reached for check_id in expected):
        return RunVerdict.PARTIAL
    if any(v.left_out for v in verdicts):
        return RunVerdict.PARTIAL
    return RunVerdict.CONFORMING
