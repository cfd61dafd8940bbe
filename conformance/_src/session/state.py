"""What the plug-in's hooks share across one pytest run: its stash keys, and the run's Report.

Every hook hands off to the room that owns its work (setup, supervision, verdicts); what those
rooms pass between hooks lives in the run's ``config.stash`` under these keys.
"""

from __future__ import annotations

from typing import Any

import pytest

VERDICT_PROPERTY = "conformance"  # the user property that carries a CheckVerdict's dict
KIT_KEY = pytest.StashKey[Any]()  # the Kit, in the process that runs the checks
REPORT_KEY = pytest.StashKey[Any]()  # the Report, in the process that writes it
SUPERVISOR_KEY = pytest.StashKey[Any]()  # the watchdog, in a supervised run's controller
PROBE_KEY = pytest.StashKey[Any]()  # the child that loads --impl while the controller starts
XFAIL_KEY = pytest.StashKey[dict[str, str]]()  # --xfail-file: check ID -> reason
SCHEDULE_SEED = "conformance_schedule_seed"  # in a pytest-xdist worker's workerinput
SCHEDULE_SEED_KEY = pytest.StashKey[int]()

# The run's config, for hooks pytest calls without it (pytest-xdist's crash hook, logreport).
CONFIG: dict[str, Any] = {}


def controller_report() -> Any:
    """The run's Report, in the process that writes it (not in a pytest-xdist worker)."""
    config = CONFIG.get("config")
    if config is None or hasattr(config, "workerinput"):
        return None
    return config.stash.get(REPORT_KEY, None)
