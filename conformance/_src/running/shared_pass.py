"""The shared pass: one call per cell for every check that judges a call on its own.

Checks whose domain is ``shared`` (domains.py) judge each call of the implementation there and
then, the first of them to run making the pass for all; a check stops at its first failure,
which is shrunk when that check's own test runs.  ``Kit.shared`` keeps the findings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance._src.calling.calls import Runner
from conformance._src.contract.catalogue import CHECKS, Check, CheckFailure, not_applicable
from conformance._src.declared.contract import Contract
from conformance._src.inputs import coverage
from conformance._src.inputs.case import Case
from conformance._src.inputs.schedule import Schedule
from conformance._src.running.pool import Pool
from conformance._src.verdict import CheckVerdict

# The checks that judge the inputs past 32 MiB (schedule.Schedule.huge_cases, one per dtype): values,
# layout and no false error, and what their call shows at no further cost (the result's type and
# dtype, the jit that made it, x intact).  Not inputs.placements: it would call again, with an
# uncommitted x of as many bytes.
HUGE_JUDGES = frozenset(
    {
        "result.type",
        "dtype.preserved",
        "values.float32",
        "values.all-dtypes",
        "layout.default-device",
        "layout.mesh",
        "layout.shards",
        "divisibility.no-false-error",
        "jit.shardings",
        "hygiene.input-intact",
    }
)


class Kit(Protocol):
    """What the shared pass needs of the session that runs the checks (kit.Kit)."""

    contract: Contract
    runner: Runner
    pool: Pool
    schedule: Schedule
    selected: frozenset[str] | None
    check_id: str
    in_schedule: bool
    shared: dict[str, Finding] | None

    def broken_probe(self, check: Check) -> str | None: ...
    def cells(self, check: Check) -> list[coverage.Cell]: ...
    def judge(self, check: Check, record: CheckVerdict, case: Case, inconclusive: list[str]) -> None: ...
    def shrink(self, check: Check, record: CheckVerdict, cell: coverage.Cell, failing: Case) -> None: ...
    def unvisited(self, check_id: str, record: CheckVerdict, cells: Any) -> list[str]: ...


@dataclass
class Finding:
    """What the shared pass found for one check: its coverage, and the first failure."""

    record: CheckVerdict
    inconclusive: list[str] = field(default_factory=list)
    failure: tuple[Case, coverage.Cell, Exception] | None = None


def members_of(kit: Kit) -> list[Check]:
    """The checks the shared pass judges for: shared domains, this contract, enough devices, selected."""
    return [
        c
        for c in CHECKS.values()
        if c.domain is not None
        and c.domain.shared
        and c.domain.axes is not None
        and (kit.selected is None or c.id in kit.selected)
        and not_applicable(c.id, kit.contract) is None
        and kit.broken_probe(c) is None
    ]


def run(kit: Kit) -> dict[str, Finding]:
    """One call per cell for every check that judges a call on its own (domains.py, ``shared``).

    Cells are taken a (dtype, mesh, length) group at a time, the
    uncommitted x first: the group's calls share their compile, and a
    check comparing with the uncommitted call finds it kept.  Each
    check judges each call there and then; a check stops at its first
    failure.  The calls are dropped once judged, so a run keeps one
    group's calls at a time however long the vectors are; a call whose
    result is over the pool's budget is held only until every check has
    judged it (pool.py: one call per input, one such result alive).
    """
    members = members_of(kit)
    findings = {c.id: Finding(CheckVerdict(c.id)) for c in members}
    cells_of = {c.id: set(kit.cells(c)) for c in members}
    for c in members:
        findings[c.id].record.cells = len(cells_of[c.id])
    # Groups in an order of the schedule's seed (a defect of some dtypes, meshes or lengths
    # shows within the first few groups, not after every other), each group's cells together.
    cells = set().union(*cells_of.values())
    groups = sorted({(c.dtype, c.mesh, c.length) for c in cells})
    random.Random(kit.schedule.seed).shuffle(groups)
    rank = {g: i for i, g in enumerate(groups)}
    every = sorted(
        cells,
        key=lambda cell: (
            rank[(cell.dtype, cell.mesh, cell.length)],
            cell.placement != "uncommitted",
            cell,
        ),
    )

    def judge_by_all(
        case: Case, cell: coverage.Cell, *, in_cells: bool = True, only: frozenset[str] | None = None
    ) -> list[Check]:
        """Every member still without a failure whose domain holds ``case`` (and, ``in_cells``,
        whose cells hold ``cell``; ``only``: of those checks) judges it (one call, shared); the
        checks that judged it, a failure now among them or not."""
        judged = []
        tier = coverage.tier_of(case.n, case.dtype.itemsize)
        for check in members:
            finding = findings[check.id]
            assert check.domain is not None
            if finding.failure is not None or (in_cells and cell not in cells_of[check.id]):
                continue
            if (only is not None and check.id not in only) or not check.domain.accepts(case, kit.contract):
                continue
            kit.check_id = check.id
            judged.append(check)
            try:
                kit.judge(check, finding.record, case, finding.inconclusive)
            except Exception as failure:  # noqa: BLE001 -- the check's verdict, given when it runs
                finding.failure = (case, cell, failure)
            if tier is not None and finding.failure is None:
                tiers = finding.record.tiers
                key = f"{tier}: {case.dtype}"
                tiers[key] = tiers.get(key, 0) + 1
        return judged

    previous = kit.check_id
    kit.in_schedule = True
    kit.pool.hold()
    try:
        group: list[Case] = []
        log = kit.runner.call_log
        for done_cells, cell in enumerate(every):
            if all(f.failure is not None for f in findings.values()):
                break  # every check has its verdict: the rest of the schedule changes nothing
            case = kit.schedule.case(cell)
            if group and (group[0].dtype, group[0].mesh, group[0].n) != (case.dtype, case.mesh, case.n):
                if log is not None:  # the watching process shows it in a piped run (supervise.py)
                    log.progress("the covering schedule's shared pass", done_cells, len(every), "cells")
                for done in group:
                    kit.pool.forget(done)
                group = []
            group.append(case)
            for check in judge_by_all(case, cell):
                findings[check.id].record.scheduled += 1
            kit.pool.drop_held()  # every check has judged this call: a huge result goes now
        for done in group:
            kit.pool.forget(done)
        for k, case in kit.schedule.octave_cases():  # every octave of lengths: one call, judged by all
            for check in judge_by_all(case, coverage.cell_of(case), in_cells=False):
                if findings[check.id].failure is None:
                    octaves = findings[check.id].record.octaves
                    octaves[f"2^{k}"] = octaves.get(f"2^{k}", 0) + 1
            kit.pool.forget(case)
        for case in kit.schedule.huge_cases():  # past 32 MiB, every dtype: one call, judged by a few
            if all(findings[c.id].failure is not None for c in members if c.id in HUGE_JUDGES):
                break  # every check that would judge it has its verdict
            judge_by_all(case, coverage.cell_of(case), in_cells=False, only=HUGE_JUDGES)
            kit.pool.forget(case)
            kit.pool.withdraw(case)
            kit.pool.drop_held()
            del case  # the next one's values are made after this one's are dropped
    finally:
        kit.pool.release()
        kit.check_id, kit.in_schedule = previous, False
    for c in members:
        record = findings[c.id].record
        record.unvisited = kit.unvisited(c.id, record, cells_of[c.id])
    return findings


def take(kit: Kit, check: Check, record: CheckVerdict, inconclusive: list[str]) -> None:
    """The shared pass's findings for ``check`` (the pass runs with the first check that asks)."""
    if kit.shared is None or check.id not in kit.shared:
        kit.shared = {**(kit.shared or {}), **run(kit)}
    finding = kit.shared.get(check.id)
    if finding is None:
        return
    found = finding.record
    record.coverage.update(found.coverage)
    record.mesh_classes.update(found.mesh_classes)
    record.octaves.update(found.octaves)
    record.tiers.update(found.tiers)
    record.cells, record.scheduled, record.unvisited = found.cells, found.scheduled, list(found.unvisited)
    record.not_judged = list(found.not_judged)
    inconclusive.extend(finding.inconclusive)
    if finding.failure is not None:
        case, cell, failure = finding.failure
        record.counterexample = repr(case)
        record.unvisited = []
        # A failure past 32 MiB is not looked for again in its cell, with lengths up to its own: it
        # is the counterexample (its token replays it exactly), not tens of drawn vectors of MiBs.
        if isinstance(failure, CheckFailure) and coverage.tier_of(case.n, case.dtype.itemsize) != "32 MiB":
            kit.shrink(check, record, cell, case)
        raise failure
