"""The one door to other packages' private internals.

Everything the kit reads from a private attribute of pytest, pytest-xdist or
execnet lives here, each behind a guard that degrades to "unknown" rather
than to a wrong verdict when the attribute moves.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any


def leave_hypothesis_unrewritten() -> None:
    """Let Hypothesis's modules load as they are, not through pytest's assert rewriting.

    pytest rewrites the asserts of every module in a distribution that has a
    ``pytest11`` entry point, Hypothesis's ~90 included.  Where bytecode is not
    written (PYTHONDONTWRITEBYTECODE) that is redone on every run: ~2 s of a
    ~30 s suite.  Hypothesis's internal asserts carry no verdict; a pytest
    without this (private) attribute is left as it is.
    """
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(marked, set) and "hypothesis" in marked and "hypothesis" not in sys.modules:
            marked.discard("hypothesis")
            getattr(finder, "_marked_for_rewrite_cache", {}).clear()


def _worker_popen(node: Any) -> subprocess.Popen[bytes] | None:
    """The ``subprocess.Popen`` of a pytest-xdist worker (execnet's private ``_io.popen``)."""
    popen = getattr(getattr(getattr(node, "gateway", None), "_io", None), "popen", None)
    return popen if isinstance(popen, subprocess.Popen) else None


def worker_pid(node: Any) -> int | None:
    popen = _worker_popen(node)
    return popen.pid if popen is not None else None


def worker_returncode(node: Any, *, wait: float) -> int | None:
    """The worker process's exit status (negative: the signal), waiting up to ``wait`` s; None if unknown."""
    popen = _worker_popen(node)
    if popen is None:
        return None
    try:
        return popen.wait(timeout=wait) if wait > 0 else popen.poll()
    except subprocess.TimeoutExpired:
        return None
