"""Forced host devices for scripts, notebooks and test frameworks other than pytest.

Under pytest, ``--host-devices N`` (or ``host_devices = N`` in the configuration) makes them
before any test module is imported.  Elsewhere, call ``ensure_host_devices(N)`` before anything
starts JAX's backend (the first ``jax.devices()`` or array operation)::

    from conformance.devices import ensure_host_devices

    devices = ensure_host_devices(8)  # 8 CPU devices, or DeviceSetupError saying why not
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformance._src.calling import devices as _devices
from conformance._src.calling.devices import DeviceSetupError

if TYPE_CHECKING:
    import jax


def ensure_host_devices(count: int, *, local: bool = False) -> list[jax.Device]:
    """Return exactly ``count`` devices, making ``count`` forced CPU devices if JAX's backend has
    not started yet; ``DeviceSetupError`` saying why not (the backend already runs with another
    count, or the platform in ``JAX_PLATFORMS`` will not start).  ``local=True`` counts this
    process's devices only (multi-process JAX).  See docs/devices.md."""
    return _devices.ensure_host_devices(count, local=local, option=None)


__all__ = ["DeviceSetupError", "ensure_host_devices"]
