"""Crashes the job: on process 1, at its 3rd call, the process aborts (SIGABRT).

``KIT_ABORT_WHERE=agree`` (default): the call returns, and the abort comes from a thread a moment
later, while the kit judges the result and the processes agree on its verdict (the kit's own step).
``KIT_ABORT_WHERE=call``: inside the call.
"""

import os
import threading
import time

import jax

from reference import pjit_double as _reference

_calls = [0]


def _abort_soon():
    time.sleep(0.05)
    os.abort()


def pjit_double(x, *, mesh=None):
    result = _reference(x, mesh=mesh)
    if jax.process_index() == 1:
        _calls[0] += 1
        if _calls[0] == 3:
            if os.environ.get("KIT_ABORT_WHERE", "agree") == "call":
                os.abort()
            threading.Thread(target=_abort_soon, daemon=True).start()
    return result
