"""Crashes the process with a segmentation fault on vectors longer than 40 elements."""

import ctypes

from reference import pjit_double as _reference


def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return _reference(x, mesh=mesh)
