"""Every option of the kit, checked before anything runs.

``validate`` is called by the plug-in from ``pytest_cmdline_main``, before
devices are made, the implementation is loaded or a worker starts.  Each bad
value is one ``pytest.UsageError`` line (exit status 4).
"""

from __future__ import annotations

import pytest


def validate(config: pytest.Config) -> None:
    """Raise ``pytest.UsageError`` with one line for the first bad option."""
