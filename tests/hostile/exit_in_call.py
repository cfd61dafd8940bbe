"""Ends the process with status 0 from inside a call, as a library that calls os._exit would."""

import os

from reference import pjit_double as _reference


def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        os._exit(0)
    return _reference(x, mesh=mesh)
