"""The kit against its mutant catalogue and its correct alternates.

Every module in tests/mutants/ is a deliberately broken ``pjit_double``; every
check its ``KILLED_BY`` names must fail on it, by name, under the default and
the ci (derandomized) Hypothesis profile alike.  The default profile's runs
here are seeded too (``--hypothesis-seed``, ``SEED``), so that a verdict of
these tests is the same on every run: the default profile draws anew each
run, and a check can miss a mutant on some draws (``python
tests/mutation_score.py --runs N`` samples fresh unseeded draws, and its kill
rates say how often).  Every module in tests/alternates/ is a correct
implementation written another way, which the whole suite must pass.  Each
run is a whole ``pytest conformance ...`` command line, as a user gives it, with
``-n 0`` (supervision has tests of its own): run in the warm kit process of this
pytest-xdist worker (tests/kit_server.py: a fresh Python costs more than most
runs), except for implementations that change JAX's global state on purpose or
hang, which get a real process each.  A mutant's run is limited to the checks of its
KILLED_BY (``--check`` each), without shrinking (tests/hypothesis_fast_fail.py):
a failing check stops at its first failing example, so judging them all costs
little more than judging one.  Verdicts are read from
each run's JSON report (``--conformance-report``).
``python tests/mutation_score.py`` runs the full suite on all of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kit_process import BROKEN
from tests.kit_server import KitServer
from tests.mutation_score import Ledger, Run, Subject, discover, kit_digest, run_conformance

MUTANTS = discover("mutants")
ALTERNATES = discover("alternates")
MIN_MUTANTS = 32
MIN_ALTERNATES = 6
SEED = 0  # --hypothesis-seed of the default profile's runs (the ci profile fixes its own)


def _known_checks() -> set[str]:
    from conformance._src.contract import checks  # noqa: F401 -- registers the checks
    from conformance._src.contract.catalogue import CHECKS

    return set(CHECKS)


def _report(run: Run) -> str:
    return (
        f"{run.subject.kind}/{run.subject.name} ({run.subject.doc}), profile {run.profile}: "
        f"exit {run.returncode}, verdict {run.verdict}, statuses {run.statuses}\n--- output (tail) ---\n"
        + "\n".join(run.output.splitlines()[-60:])
    )


def test_the_catalogue_is_complete_and_well_formed() -> None:
    known = _known_checks()
    assert len(MUTANTS) >= MIN_MUTANTS, f"only {len(MUTANTS)} mutants"
    assert len(ALTERNATES) >= MIN_ALTERNATES, f"only {len(ALTERNATES)} alternates"
    for subject in MUTANTS + ALTERNATES:
        assert subject.doc, f"{subject.name}: needs a docstring"
        assert set(subject.killed_by + subject.inconclusive) <= known, f"{subject.name}: unknown check ID"
    for mutant in MUTANTS:
        assert "\n" not in mutant.doc, f"{mutant.name}: the docstring names the defect in one line"
        assert mutant.killed_by, f"{mutant.name}: KILLED_BY is empty"
    for alternate in ALTERNATES:
        assert not alternate.killed_by, f"{alternate.name}: an alternate is correct, it has no KILLED_BY"


@pytest.mark.parametrize("profile", ["default", "ci"])
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_mutant_is_killed_by_every_check_it_names(
    mutant: Subject, profile: str, kit_server: KitServer
) -> None:
    # Only the checks of its KILLED_BY (python tests/mutation_score.py runs the whole suite).
    run = run_conformance(
        mutant,
        profile,
        checks=mutant.killed_by,
        in_process=True,
        server=_server_for(mutant, kit_server),
        seed=SEED if profile == "default" else None,
    )
    assert run.returncode == 1, _report(run)
    assert run.report is not None, "no report written\n" + _report(run)
    assert run.verdict == "not conforming", _report(run)
    missed = [c for c in mutant.killed_by if run.statuses.get(c) not in BROKEN]
    assert not missed, f"KILLED_BY checks that did not fail: {', '.join(missed)}\n" + _report(run)


def _server_for(subject: Subject, server: KitServer) -> KitServer | None:
    """The warm kit process, unless the implementation changes global state on purpose, hangs or
    needs another number of devices."""
    if "hygiene.global-state" in subject.killed_by or subject.call_timeout is not None:
        return None
    if subject.devices is not None:  # the server's backend has its 8 devices
        return None
    return server


def _is_inconclusive(run: Run, check_id: str) -> bool:
    return run.statuses.get(check_id) == "inconclusive"


@pytest.mark.slow
@pytest.mark.parametrize("alternate", ALTERNATES, ids=[a.name for a in ALTERNATES])
def test_alternate_passes_the_whole_suite(alternate: Subject, kit_server: KitServer) -> None:
    run = run_conformance(
        alternate, "default", in_process=True, server=_server_for(alternate, kit_server), seed=SEED
    )
    assert run.returncode == 0, _report(run)
    assert run.verdict == "conforming" and not run.failed, _report(run)
    assert len(run.statuses) == len(_known_checks()), _report(run)
    for check_id, status in run.statuses.items():
        if check_id in alternate.inconclusive and status != "passed":
            assert _is_inconclusive(run, check_id), f"{check_id}: {status}\n" + _report(run)
        else:
            assert status == "passed", f"{check_id}: {status}\n" + _report(run)
    if alternate.name in ("aot_compiled", "s_aot_traced_stages"):  # executables are watched: judged
        assert run.statuses.get("jit.shardings") == "passed", _report(run)


def test_the_ledger_keeps_runs_by_kit_and_subject(tmp_path: Path) -> None:
    """A run appended to the ledger is read back whole for the same kit digest, subject and
    profile, and not for another kit or profile (tests/mutation_score.py --ledger)."""
    mutant = MUTANTS[0]
    report = {
        "run": {"schedule_seed": 7},
        "verdict": {"status": "not conforming"},
        "checks": [
            {"id": "values.float32", "status": "failed", "examples": 3, "message": "m"},
            {"id": "layout.mesh", "status": "passed", "examples": 8, "message": ""},
        ],
    }
    run = Run(mutant, "default", 1, "output", 12.5, report)
    ledger = Ledger(tmp_path / "ledger.jsonl", "kit-a")
    ledger.add(run)
    ledger.add(Run(mutant, "default", 1, "the tail", 3.0, None))
    back = ledger.runs([mutant], "default")[mutant]
    assert [(r.returncode, r.seconds, r.schedule_seed, r.verdict) for r in back] == [
        (1, 12.5, 7, "not conforming"),
        (1, 3.0, None, None),
    ]
    assert back[0].statuses == run.statuses and back[0].examples == run.examples
    assert back[0].killed and not back[1].killed
    assert back[1].output == "the tail"  # a survivor's output tail is kept
    assert Ledger(tmp_path / "ledger.jsonl", "kit-b").runs([mutant], "default")[mutant] == []
    assert ledger.runs([mutant], "ci")[mutant] == []
    assert len(kit_digest()) == 16
