"""The self-test: each private path of JAX a verdict rests on, proven on the installed versions.

The door to those paths is ``internals``; this room stands above it and exercises it through
the kit's own users of it (``calls.global_state``, ``jit_probe.observe``), so that the door
imports nothing of the kit.  A check names the probes it needs (``Check.needs``); a failed
probe makes that check a kit error, neither passed nor failed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from conformance._src import internals
from conformance._src.calling import calls
from conformance._src.library import jit_probe

COMPILE_COUNT = "compile-count"  # internals.compile_counter: compile.once
JIT_SPY = "jit-spy"  # internals.jit_executions, through jit_probe.observe: jit.shardings
JAXPR_JIT = "jaxpr-jit"  # the jit equation's parameters in a jaxpr (jit_probe.jit_calls): jit.shardings
GLOBAL_STATE = "global-state"  # mesh_context, through calls.global_state: hygiene.global-state
CLUSTER_CLIENT = "cluster-client"  # distributed_client: every check of a --distributed run


class ProbeFailed(Exception):
    """A probe saw something other than what the installed versions must show."""


def _known_jit() -> tuple[Callable[[Any], Any], Any, Any]:
    """A jitted doubling with known shardings over the first two devices (or the only one), and its input."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()[:2]
    sharding = NamedSharding(Mesh(np.array(devices), ("probe",)), PartitionSpec("probe"))
    fn = jax.jit(lambda v: v * 3 + 1, in_shardings=sharding, out_shardings=sharding)
    # A shape of its own (17 per device), so that no earlier compile answers the probe's.
    x = jax.device_put(np.arange(17 * len(devices), dtype=np.float32), sharding)
    return fn, x, sharding


def _probe_compile_count() -> None:
    counter = internals.compile_counter()
    fn, x, _ = _known_jit()
    before = counter.count
    fn(x).block_until_ready()
    first = counter.count - before
    fn(x).block_until_ready()
    second = counter.count - before - first
    if first < 1 or second != 0:
        raise ProbeFailed(
            f"a new jitted function's first call counted {first} compile(s), its second {second}; "
            f"expected 1 or more, then 0 (jax.monitoring event {internals.BACKEND_COMPILE_EVENT!r})"
        )


def _probe_jit_spy() -> None:

    fn, x, sharding = _known_jit()
    for attempt in ("first", "repeated"):  # a repeated call must take the watched path too
        _, chain, _ = jit_probe.observe(fn, x)
        if not chain or not (
            jit_probe.is_layout(chain[0].in_sharding, sharding)
            and jit_probe.is_layout(chain[0].out_sharding, sharding)
        ):
            raise ProbeFailed(f"a {attempt} call of a jit with known shardings was seen as {chain!r}")


def _probe_jaxpr_jit() -> None:
    import jax

    fn, x, sharding = _known_jit()
    found = list(jit_probe.jit_calls(jax.make_jaxpr(fn)(x)))
    if not any(
        jit_probe.is_layout(c.in_sharding, sharding) and jit_probe.is_layout(c.out_sharding, sharding)
        for c in found
    ):
        raise ProbeFailed(f"the jaxpr of a jit with known shardings showed {found!r}")


def _probe_global_state() -> None:
    import jax
    import numpy as np
    from jax.sharding import Mesh

    mesh = Mesh(np.array(jax.devices()[:1]), ("probe",))
    enter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)
    before = calls.global_state()
    with enter(mesh) if enter is not None else mesh:
        inside = calls.global_state()
    after = calls.global_state()
    changed = sorted(k for k in before if inside.get(k) != before[k])
    if not changed or after != before:
        raise ProbeFailed(
            "the snapshot of JAX's configuration and mesh context did not see a mesh set for a block"
            if not changed
            else "the snapshot changed after a block with a mesh set had ended"
        )


def _probe_cluster_client() -> None:
    import jax

    client = internals.distributed_client()
    if client is None:
        raise ProbeFailed("jax.distributed's key-value client is not there, though the cluster is up")
    key = f"conformance/probe/{jax.process_index()}"
    client.key_value_set(key, "1")
    if client.blocking_key_value_get(key, 10_000) != "1":
        raise ProbeFailed("a value set in jax.distributed's key-value store did not read back")


PROBES: dict[str, Callable[[], None]] = {
    COMPILE_COUNT: _probe_compile_count,
    JIT_SPY: _probe_jit_spy,
    JAXPR_JIT: _probe_jaxpr_jit,
    GLOBAL_STATE: _probe_global_state,
}
CLUSTER_PROBES: dict[str, Callable[[], None]] = {CLUSTER_CLIENT: _probe_cluster_client}


def self_test(*, cluster: bool = False) -> dict[str, str]:
    """Run every probe (and, in a --distributed run, the cluster's); return, per probe that
    failed, why (empty: every private path works here)."""
    failed: dict[str, str] = {}
    for name, probe in {**PROBES, **(CLUSTER_PROBES if cluster else {})}.items():
        try:
            probe()
        except Exception as error:  # noqa: BLE001 -- whatever a moved internal raises is the finding
            said = str(error) if isinstance(error, ProbeFailed) else f"{type(error).__name__}: {error}"
            failed[name] = said
    return failed


def versions() -> str:
    """The installed versions a probe's verdict is about, in one line."""
    from importlib import metadata

    found = []
    for name in ("jax", "jaxlib", "hypothesis", "pytest", "pytest-xdist", "numpy"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join(found) + f", Python {sys.version.split()[0]}"
