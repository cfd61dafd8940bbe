"""The conformance suite: one test per check, named by the check's stable ID."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from conformance._src.contract import checks  # noqa: F401 -- registers the checks
from conformance._src.contract.catalogue import CHECKS
from conformance.plugin import VERDICT_PROPERTY

if TYPE_CHECKING:
    from conformance._src.running.kit import Kit


@pytest.mark.parametrize("check_id", list(CHECKS))
def test_check(check_id: str, conformance_kit: Kit, record_property: Any) -> None:
    try:
        conformance_kit.run_check(check_id)
    finally:
        # The verdict travels with the test report, so pytest-xdist workers'
        # verdicts reach the one report the controller writes.
        verdict = conformance_kit.records.get(check_id)
        if verdict is not None:
            record_property(VERDICT_PROPERTY, verdict.to_dict())
