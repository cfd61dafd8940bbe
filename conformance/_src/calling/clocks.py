"""Time passing, as the implementation sees it: its clocks read ahead during one call.

A cache that drops entries left idle for some seconds, a timeout, a "rebuild after an hour"
rule: such paths are reached only when time passes between two calls, and a history of calls
runs in milliseconds.  A real pause would cost the run its time budget, so the kit moves the
implementation's clocks instead: during a call of ``ahead(seconds)``, ``time.time``,
``time.monotonic``, ``time.perf_counter`` and their ``_ns`` forms read that many seconds ahead
of the true time, on the thread that makes the call and only there, and only while it runs.
The kit's own timing (the call's duration, the watchdog's deadline, Hypothesis's clock) reads
the true time: it is taken outside the call or on other threads.

What it cannot reach: a clock imported by name before the run (``from time import monotonic``
binds the true function), ``datetime.now()``, and clocks read on threads the implementation
starts itself.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# The clocks of the time module an implementation reads, each with the factor from seconds to
# its unit.
CLOCKS = {
    "time": 1,
    "monotonic": 1,
    "perf_counter": 1,
    "time_ns": 10**9,
    "monotonic_ns": 10**9,
    "perf_counter_ns": 10**9,
}

_lock = threading.Lock()
_ahead: dict[int, int] = {}  # thread id -> seconds its clocks read ahead
_true: dict[str, Callable[[], Any]] = {}  # the time module's own clocks while patched


def _moved(name: str, true: Callable[[], Any], factor: int) -> Callable[[], Any]:
    def clock() -> Any:
        seconds = _ahead.get(threading.get_ident())
        return true() if seconds is None else true() + seconds * factor

    clock.__name__ = clock.__qualname__ = name
    clock.__doc__ = true.__doc__
    return clock


@contextlib.contextmanager
def ahead(seconds: int) -> Iterator[None]:
    """Within the block, the calling thread's clocks read ``seconds`` ahead (0: untouched)."""
    if not seconds:
        yield
        return
    me = threading.get_ident()
    with _lock:
        if not _ahead:
            for name, factor in CLOCKS.items():
                _true[name] = getattr(time, name)
                setattr(time, name, _moved(name, _true[name], factor))
        _ahead[me] = seconds
    try:
        yield
    finally:
        with _lock:
            _ahead.pop(me, None)
            if not _ahead:
                for name, true in _true.items():
                    setattr(time, name, true)
                _true.clear()
