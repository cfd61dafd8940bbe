"""A pytest plug-in for the mutant runs: Hypothesis stops at the first failing example.

``python -m pytest conformance -p tests.hypothesis_fast_fail ...`` re-registers
Hypothesis's profiles (default, ci, thorough) without the shrink and explain
phases and without an example database.  The kit passes its own settings per
profile (running/explore.py, PROFILES) on top, so the same examples are drawn in the same
order and a check fails on exactly the example it would have failed on, only
without the minutes of shrinking afterwards: whether a mutant is killed does
not depend on shrinking.  Without the database no run replays another run's
failures (every mutant's failures would otherwise be saved under the same
check and tried first on the next mutant), so each run is a fresh attempt.
The examples count of a failing check is then the examples it took to find it.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis.errors import InvalidArgument

PHASES = tuple(p for p in Phase if p.name not in ("shrink", "explain"))


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own plug-in loads --hypothesis-profile
def pytest_configure(config: pytest.Config) -> None:
    """In every run that loads this plug-in, also a second one in the same process (the warm
    kit process of tests/kit_server.py): a module is imported once, a run configured each time."""
    for name in ("default", "ci", "thorough"):
        try:
            base = settings.get_profile(name)
        except InvalidArgument:
            base = settings.get_profile("default")
        settings.register_profile(name, base, phases=PHASES, database=None)
