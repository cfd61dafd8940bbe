"""JAX's own known bugs in the supported range: the inputs on which no implementation can be judged.

A correct implementation must not be failed for a bug of the JAX it runs
on.  Each ``KnownBug`` names the JAX releases it affects, the release that
fixed it, the inputs it hits and the exception it raises.  Where the
installed JAX has it, an input it hits is not judged when the
implementation raises that exception (``Kit.call``), nor asked to go
through ``jax.jit`` at all (``jit.shardings``); the check's verdict and the
report count those inputs, with the bug's words, so a reader sees exactly
what this JAX kept the kit from checking.  A limit of JAX on the backend
(``bug=False``: a move JAX does not make there, which an implementation may
make another way) is handled alike, except that ``jit.shardings`` still
judges the inputs it hits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from conformance._src.calling.devices import jax_version
from conformance._src.declared.draw import JIT_SPLITS_EMPTY_FROM
from conformance._src.declared.terms import data_axis_size
from conformance._src.inputs.case import Case, process_copy_elsewhere


def _text(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)


@dataclass(frozen=True)
class KnownBug:
    id: str
    what: str  # what JAX does wrong, in one sentence
    fixed_in: tuple[int, ...] | None  # None: in every release so far
    message: str  # a fragment of the exception's message
    error: type[BaseException]
    hits: Callable[[Case], bool]  # whether an input is one the bug hits (on a JAX that has it)
    # Whether the installed JAX has it, measured by doing what the bug does (once per process);
    # None: known from the releases alone (``fixed_in``).
    measured: Callable[[], bool] | None = None
    also: tuple[str, ...] = ()  # other fragments of the messages it raises with
    # False: not a bug but a limit of JAX on this backend, which an implementation may get
    # around (another way than JAX's refused one): jit.shardings still judges inputs it hits.
    bug: bool = True

    def present(self) -> bool:
        """Whether the installed JAX has the bug."""
        if self.measured is not None:
            return self.measured()
        return self.fixed_in is None or jax_version() < self.fixed_in

    def raised(self, error: BaseException | None) -> bool:
        return isinstance(error, self.error) and any(m in str(error) for m in (self.message, *self.also))

    def describe(self) -> str:
        """The bug, the installed JAX and the fix: ``jax.jit raises ... (JAX 0.7.0; fixed in 0.9.1)``."""
        import jax

        fixed = "not fixed yet" if self.fixed_in is None else f"fixed in JAX {_text(self.fixed_in)}"
        if self.measured is not None:
            fixed = "measured in this run"
        if not self.bug:
            return f"{self.what} (a limit of JAX {jax.__version__} on this backend, {fixed})"
        return f"{self.what} (a bug of JAX {jax.__version__}, {fixed})"


EMPTY_SPLIT = KnownBug(
    id="jax-jit-empty-split",
    what=(
        "jax.jit raises AssertionError('Unexpected XLA sharding override') for a length-0 array "
        "split over more than one device"
    ),
    fixed_in=JIT_SPLITS_EMPTY_FROM,
    message="Unexpected XLA sharding override",
    error=AssertionError,
    hits=lambda case: case.n == 0 and data_axis_size(case.mesh) > 1,
)


def _nan_for_every_process(case: Case) -> bool:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from conformance._src.declared.terms import target_sharding

    if jax.process_count() < 2 or case.placement[0] not in ("numpy", "uncommitted"):
        return False
    if not jnp.issubdtype(case.dtype, jnp.inexact) or not np.isnan(case.values).any():  # bfloat16 too
        return False
    processes = {getattr(d, "process_index", 0) for d in target_sharding(case.mesh).device_set}
    return len(processes) == jax.process_count()


NAN_ACROSS_PROCESSES = KnownBug(
    id="jax-device-put-nan-across-processes",
    what=(
        "jax.device_put of a host or uncommitted array holding NaN to a sharding over every "
        "process's devices raises AssertionError ('... is not the same on each process'): its "
        "check that every process passed the same values compares with ==, and NaN != NaN"
    ),
    fixed_in=None,
    message="is not the same on each process",
    error=AssertionError,
    hits=_nan_for_every_process,
)


def _one_device_memory_onto_many(case: Case) -> bool:
    """An input committed to one device in another memory kind, for a target split over several devices."""
    return (
        case.placement[0] == "memory"
        and case.placement[2] != "target"
        and case.placement[1] in _memory_kinds_jax_cannot_spread()
        and data_axis_size(case.mesh) > 1  # split: onto a replicated layout JAX 0.12.1 moves it
    )


@cache
def _memory_kinds_jax_cannot_spread() -> frozenset[str]:
    """The memory kinds from which this JAX's own ``jax.device_put`` cannot move a one-device
    array onto a layout over two devices in their default memory: measured, not assumed (seen:
    ``pinned_host`` on CPU, JAX 0.12.1; none on 0.10.2)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    from conformance._src.calling.devices import other_memory_kinds

    devices = jax.local_devices()
    if len(devices) < 2:
        return frozenset()
    spread = NamedSharding(Mesh(np.array(devices[:2]), ("data",)), PartitionSpec("data"))
    failing = set()
    for kind in other_memory_kinds():
        try:
            x = jax.device_put(np.zeros(2, np.float32), SingleDeviceSharding(devices[0], memory_kind=kind))
            jax.block_until_ready(jax.device_put(x, spread))
        except Exception as error:  # noqa: BLE001 -- JAX's own refusal is what is measured
            if ONE_DEVICE_MEMORY_SPREAD.message in str(error):
                failing.add(kind)
    return frozenset(failing)


ONE_DEVICE_MEMORY_SPREAD = KnownBug(
    id="jax-device-put-memory-kind-spread",
    what=(
        "jax.device_put of an array committed to one device in another memory kind (pinned_host) "
        "onto a layout split over several devices raises JaxRuntimeError ('UNIMPLEMENTED: Unsupported "
        "layout used for PjRt CPU buffers'), and so does a jit given it"
    ),
    fixed_in=None,
    message="Unsupported layout used for PjRt CPU buffers",
    error=RuntimeError,  # jax.errors.JaxRuntimeError
    hits=_one_device_memory_onto_many,
    measured=lambda: bool(_memory_kinds_jax_cannot_spread()),
)

_CROSS_PROCESS_FRAGMENTS = (
    "not support cross-host device transfers",  # a one-device layout on another process's device
    "a Sharding which represents addressable devices",  # a layout over several processes' devices
)


@cache
def _jax_cannot_put_across_processes() -> bool:
    """Whether this JAX's own ``jax.device_put`` refuses to move an array committed to one device
    of this process onto a layout with devices of another process: measured, not assumed (seen:
    JAX 0.10.2 on CPU, for both puts below).  Every process makes the same puts at the same step
    of the run, each of a form JAX either refuses at once, before any transfer, or makes with
    every process taking part: an array on this process's device onto a layout over every
    device, and a global array on process 0's device onto process 1's device."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    if jax.process_count() < 2:
        return False
    first: dict[int, jax.Device] = {}  # each process's first device
    for device in jax.devices():
        first.setdefault(device.process_index, device)
    n = len(jax.devices())
    values = np.zeros(n, np.float32)
    puts = [
        (
            lambda: jax.device_put(values, jax.local_devices()[0]),
            NamedSharding(Mesh(np.array(jax.devices()), ("all",)), PartitionSpec("all")),
        ),
        (
            lambda: jax.make_array_from_callback((n,), SingleDeviceSharding(first[0]), lambda i: values[i]),
            SingleDeviceSharding(first[1]),
        ),
    ]
    refused = False
    for make, target in puts:
        try:
            jax.block_until_ready(jax.device_put(make(), target))
        except ValueError as error:  # JAX's own refusal is what is measured
            refused = refused or any(m in str(error) for m in _CROSS_PROCESS_FRAGMENTS)
    return refused


CROSS_PROCESS_PUT = KnownBug(
    id="jax-device-put-across-processes",
    what=(
        "across processes, jax.device_put of an array committed to one device of this process "
        "(each process's own copy of the values) onto a layout with devices of another process "
        "raises ValueError ('... does not support cross-host device transfers', or '... must be a "
        "Device or a Sharding which represents addressable devices'): it moves no committed array "
        "between processes here; every process holds the same values, so a host copy of them "
        "(jax.make_array_from_callback) reaches the layout"
    ),
    fixed_in=None,
    message=_CROSS_PROCESS_FRAGMENTS[0],
    also=_CROSS_PROCESS_FRAGMENTS[1:],
    error=ValueError,
    hits=process_copy_elsewhere,
    measured=_jax_cannot_put_across_processes,
    bug=False,
)

KNOWN_BUGS = (EMPTY_SPLIT, NAN_ACROSS_PROCESSES, ONE_DEVICE_MEMORY_SPREAD, CROSS_PROCESS_PUT)


@cache
def present() -> tuple[KnownBug, ...]:
    """The known bugs of the installed JAX."""
    return tuple(bug for bug in KNOWN_BUGS if bug.present())


def hitting(case: Case | None) -> KnownBug | None:
    """The installed JAX's known bug that ``case`` hits, if any."""
    if case is None:
        return None
    return next((bug for bug in present() if bug.hits(case)), None)


class KnownBugHit(Exception):
    """An input the installed JAX's known bug keeps from being judged."""

    def __init__(self, bug: KnownBug) -> None:
        super().__init__(bug.describe())
        self.bug = bug
