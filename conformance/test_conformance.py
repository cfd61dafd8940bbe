"""The conformance suite: one test per check, named by the check's stable ID."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from conformance._src.contract import checks  # noqa: F401 -- registers the checks
from conformance._src.contract.catalogue import run_order
from conformance._src.running import declared_checks as _declared  # noqa: F401 -- and the declared ones
from conformance._src.running import platform_checks as _platform  # noqa: F401 -- an accelerator run's
from conformance._src.session.options import declared_contract, run_part
from conformance.plugin import VERDICT_PROPERTY

if TYPE_CHECKING:
    from conformance._src.running.kit import Kit


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per check of the run's contract: pjit_double's (seed, full), or a declared one's."""
    if "check_id" in metafunc.fixturenames:
        metafunc.parametrize(
            "check_id", run_order(declared_contract(metafunc.config), run_part(metafunc.config))
        )


def test_check(check_id: str, conformance_kit: Kit, record_property: Any) -> None:
    try:
        conformance_kit.run_check(check_id)
    finally:
        # The verdict travels with the test report, so pytest-xdist workers'
        # verdicts reach the one report the controller writes.
        verdict = conformance_kit.records.get(check_id)
        if verdict is not None:
            record_property(VERDICT_PROPERTY, verdict.to_dict())
