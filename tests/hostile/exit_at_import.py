"""Ends the process with status 0 while being imported."""

import os

os._exit(0)


def pjit_double(x, *, mesh=None):  # never reached
    return x * 2
