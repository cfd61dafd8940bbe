"""``pjit_double``'s full contract judged by the generic ``fn.*`` checks alone: the gap between the
two forms of checks (issue 41), measured with

    python tests/mutation_score.py --contract tests/generic_full.py:CONTRACT

It is ``conformance.contracts.FULL`` but for its ``atol``: a function giving 0, as exact as
``atol=0``, which takes it out of the one-vector form (``Contract.one_vector`` asks for constant
tolerances), so that the checks written for any contract judge it, not ``pjit_double``'s own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from conformance.contracts import FULL


def exact(*arguments: np.ndarray) -> float:
    """No difference allowed: the same bound as atol=0."""
    return 0.0


CONTRACT = dataclasses.replace(FULL, name="pjit_double's full contract, generic checks", atol=exact)
