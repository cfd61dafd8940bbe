"""Right on the devices it is given, wrong where ``jax.default_device`` is set: a stand-in, on a
machine with CPU devices alone, for a function whose result depends on the platform it runs on
(platform.agrees computes the CPU's result under ``jax.default_device`` of a CPU device)."""

from __future__ import annotations

from typing import Any

import jax

from reference import pjit_double as _reference


def pjit_double(x: Any, *, mesh: Any = None) -> jax.Array:
    result = _reference(x, mesh=mesh)
    if jax.config.jax_default_device is not None:
        return result + result.dtype.type(1) if result.dtype.kind != "b" else result
    return result
