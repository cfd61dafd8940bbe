"""Forced host devices for scripts, notebooks and test frameworks other than pytest.

Under pytest, ``--host-devices N`` (or ``host_devices = N`` in the configuration) makes them
before any test module is imported.  Elsewhere, call ``ensure_host_devices(N)`` before anything
starts JAX's backend (the first ``jax.devices()`` or array operation)::

    from conformance.devices import ensure_host_devices

    devices = ensure_host_devices(8)  # 8 CPU devices, or DeviceSetupError saying why not
"""

from conformance._src.calling.devices import DeviceSetupError, ensure_host_devices

__all__ = ["DeviceSetupError", "ensure_host_devices"]
