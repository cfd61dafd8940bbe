"""The conformance suite: one test per check, named by the check's stable ID."""

from __future__ import annotations

from typing import Any

import pytest

from conformance import checks  # noqa: F401 -- registers the checks
from conformance.plugin import record_of
from conformance.registry import CHECKS


@pytest.mark.parametrize("check_id", list(CHECKS))
def test_check(check_id: str, conformance_kit: Any, record_property: Any) -> None:
    try:
        conformance_kit.run_check(check_id)
    finally:
        # Travels with the test report, so pytest-xdist workers' verdicts
        # reach the one report the controller writes.
        record_property("conformance", record_of(conformance_kit, check_id))
