"""Forced host devices for scripts, notebooks and test frameworks other than pytest.

Under pytest, ``--host-devices N`` (or ``host_devices = N`` in the configuration) makes them
before any test module is imported.  Elsewhere, call ``ensure_host_devices(N)`` before anything
starts JAX's backend (the first ``jax.devices()`` or array operation)::

    from conformance.devices import ensure_host_devices

    devices = ensure_host_devices(8)  # 8 CPU devices, or DeviceSetupError saying why not

Every message of the library, and every example Hypothesis prints from its strategies, shows a
mesh as the call that rebuilds it: ``mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from conformance._src.calling import devices as _devices
from conformance._src.calling.devices import DeviceSetupError

if TYPE_CHECKING:
    import jax
    import numpy as np


def ensure_host_devices(count: int, *, local: bool = False) -> list[jax.Device]:
    """Return exactly ``count`` devices, making ``count`` forced CPU devices if JAX's backend has
    not started yet; ``DeviceSetupError`` saying why not (the backend already runs with another
    count, or the platform in ``JAX_PLATFORMS`` will not start).  ``local=True`` counts this
    process's devices only (multi-process JAX).  See docs/devices.md."""
    return _devices.ensure_host_devices(count, local=local, option=None)


def mesh_from_ids(
    ids: Sequence[Any] | np.ndarray, axis_names: Sequence[str], *, axis_types: Sequence[Any] | None = None
) -> jax.sharding.Mesh:
    """The mesh whose devices, by id, are laid out as ``ids`` (nested lists, one level per axis)
    with ``axis_names`` (and ``axis_types``; JAX's default if not given): the mesh a message of
    the library or a falsifying example printed, made again.  See docs/devices.md."""
    from conformance._src.library import show  # imports jax: not when this module is imported

    return show.mesh_from_ids(ids, axis_names, axis_types=axis_types)


__all__ = ["DeviceSetupError", "ensure_host_devices", "mesh_from_ids"]
