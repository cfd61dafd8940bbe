"""The conformance suite: one test per check, named by the check's stable ID."""

from __future__ import annotations

import pytest

from conformance import checks  # noqa: F401 -- registers the checks
from conformance.registry import CHECKS


@pytest.mark.parametrize("check_id", list(CHECKS))
def test_check(check_id: str, conformance_kit) -> None:  # type: ignore[no-untyped-def]
    conformance_kit.run_check(check_id)
