"""Forced host devices: make N CPU devices before JAX's backend starts.

JAX reads the device count once, when its backend starts (the first
``jax.devices()`` or array operation; importing jax does not start it).  The
kit therefore sets ``jax_num_cpu_devices`` as early as it can and afterwards
checks that it really got N devices: testing on fewer devices than asked for
would silently skip every multi-device mesh, so that is an error instead.

The user's XLA_FLAGS are left as they are: the JAX option takes precedence
over ``--xla_force_host_platform_device_count`` and touches no other flag.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from conformance._src import internals

if TYPE_CHECKING:
    import jax

DEFAULT_DEVICES = 8


def jax_version() -> tuple[int, ...]:
    """The installed JAX's release as a tuple of ints (``0.7.2`` -> ``(0, 7, 2)``)."""
    import jax

    return tuple(int(part) for part in re.findall(r"\d+", jax.__version__)[:3])


class DeviceSetupError(RuntimeError):
    """The kit cannot get the device count it was asked for."""


def backend_started() -> bool:
    """Whether JAX's backend is up.  Where JAX does not say, it is taken as not up: the count is
    forced, and the count check of ``ensure_host_devices`` catches a backend that was up after all."""
    started = internals.backend_started()
    return False if started is None else started


def ensure_host_devices(
    count: int, *, local: bool = False, option: str | None = "--devices", cpu: int | None = None
) -> list[jax.Device]:
    """Return exactly ``count`` devices, making them if the backend is not up yet.

    ``local=True`` (multi-process runs) counts this process's devices only.  ``option`` is how
    the caller asked for the count (the kit's ``--devices``, a user's ``--host-devices``), which
    the messages tell them to change; ``None``: a call of ``ensure_host_devices`` itself.
    ``cpu``: an accelerator run's chips' part (calling/chips.py), whose ``count`` devices are the
    accelerator's, with ``cpu`` forced CPU devices beside them (``jax.devices("cpu")``).
    """
    import jax  # here, not at import: a dormant plug-in must not cost a run JAX's import

    def ask(n: int) -> str:
        return f"run with {option} {n}" if option else f"call ensure_host_devices({n})"

    if count < 1:
        raise DeviceSetupError(f"{option or 'the count'} must be at least 1, got {count}")
    if not backend_started():
        if "JAX_PLATFORMS" not in os.environ:
            # The kit tests sharding on forced *host* devices; an accelerator
            # would bring its own, different device count.
            jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", count if cpu is None else cpu)
    try:
        devices = jax.local_devices() if local else jax.devices()
    except Exception as exc:  # noqa: BLE001 -- RuntimeError, or a bare AssertionError for a missing GPU
        raise DeviceSetupError(backend_failure(exc)) from None
    if cpu is not None and len(jax.devices("cpu")) != cpu:
        raise DeviceSetupError(
            f"the chips' part needs {cpu} CPU devices beside them, got {len(jax.devices('cpu'))}"
        )
    if len(devices) != count and _platforms() not in ("", "cpu"):
        raise DeviceSetupError(
            f"JAX_PLATFORMS={_platforms()} gives {len(devices)} {devices[0].platform} device(s), "
            f"not the {count} asked for: {ask(len(devices))}, or unset JAX_PLATFORMS "
            f"to test on {count} forced CPU devices"
        )
    if len(devices) != count:
        raise DeviceSetupError(
            f"the kit needs {count} devices but JAX's backend is already running with "
            f"{len(devices)} ({devices[0].platform}); something started it before the kit "
            f"could set the count (a conftest or plug-in that calls jax.devices() or makes "
            f"an array at import time). Remove that, or {ask(len(devices))}, "
            f"or set XLA_FLAGS=--xla_force_host_platform_device_count={count} before the process starts."
        )
    return devices


def _platforms() -> str:
    return os.environ.get("JAX_PLATFORMS", "").strip()


def backend_failure(exc: BaseException) -> str:
    """One line: the backend did not start, JAX's reason, and what to do."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = lines[0] if lines else f"{type(exc).__name__} (no device of that platform was found)"
    platforms = _platforms()
    if platforms and platforms != "cpu":
        return (
            f"JAX's backend could not start for JAX_PLATFORMS={platforms}: {reason}; "
            f"unset JAX_PLATFORMS to test on forced CPU devices"
        )
    return f"JAX's backend could not start: {reason}"


def other_memory_kinds() -> tuple[str, ...]:
    """The memory kinds the first device offers besides its default one (on CPU: ``pinned_host``
    and ``unpinned_host``), in a fixed order; the default one alone where it offers no other."""
    import jax

    device = jax.devices()[0]
    try:
        default = device.default_memory().kind
        kinds = sorted({m.kind for m in device.addressable_memories()} - {default})
    except Exception:  # noqa: BLE001 -- a backend without memory kinds: its default one
        return ("device",)
    return tuple(kinds) or (default,)
