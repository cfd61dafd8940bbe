"""The context a call is made in (``Case.under``): ``jax.default_device(d)`` or ``jax.set_mesh(mesh)``.

Entered on the thread that makes the call, around the call alone (both are thread-local in JAX),
so that what the implementation builds during that call sees it, and nothing after it does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
from jax.sharding import Mesh


def set_mesh_available() -> bool:
    """Whether this JAX has a mesh context to enter (``jax.set_mesh``; ``use_mesh`` before it)."""
    return _set_mesh() is not None


def _set_mesh() -> Any:
    return getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)


@contextlib.contextmanager
def entered(under: tuple[Any, ...], mesh: Mesh | None) -> Iterator[None]:
    """Within the block, the calling thread is ``under`` that context (``()``: none)."""
    if not under:
        yield
    elif under[0] == "default_device":
        device = next(d for d in jax.devices() if int(d.id) == int(under[1]))
        with jax.default_device(device):
            yield
    elif under[0] == "set_mesh":
        enter = _set_mesh()
        if enter is None or mesh is None:
            raise ValueError("jax.set_mesh needs this JAX to have it and the call to have a mesh")
        with enter(mesh):
            yield
    else:
        raise ValueError(f"unknown context {under!r}")
