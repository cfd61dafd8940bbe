"""Hangs while holding the GIL, as a C extension that blocks would: no Python thread runs again."""

from reference import pjit_double as _reference


def _spin_holding_the_gil() -> None:
    # One bytecode-free C loop: re.match on a pathological pattern never releases the GIL.
    import re

    re.match(r"(a+)+$", "a" * 64 + "b")


def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        _spin_holding_the_gil()
    return _reference(x, mesh=mesh)
