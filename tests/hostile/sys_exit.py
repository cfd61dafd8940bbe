"""Raises SystemExit(0) from inside a call."""

import sys

from reference import pjit_double as _reference


def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        sys.exit(0)
    return _reference(x, mesh=mesh)
