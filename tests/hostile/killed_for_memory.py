"""Allocates, then dies as the kernel's out-of-memory killer ends a process: SIGKILL.

A real out-of-memory kill needs a memory limit this test cannot set for the
kit's process alone; the kit sees exactly this signal either way.
"""

import os
import signal

import numpy as np

from reference import pjit_double as _reference


def pjit_double(x, *, mesh=None):
    if x.shape[0] > 40:
        hog = np.ones(256 * 2**20, dtype=np.uint8)  # 256 MiB, touched
        hog.sum()
        os.kill(os.getpid(), signal.SIGKILL)
    return _reference(x, mesh=mesh)
