"""The checks of an accelerator run (calling/chips.py), written over any contract.

``platform.agrees`` runs in the chips' part, where the chips and forced CPU devices share one
process: for inputs drawn from the contract, the result on the chips' mesh must equal the
function's own result for the same inputs on as many CPU devices laid out alike, within the
contract's tolerance.  ``platform.chips`` runs in the forced-CPU part: it waits for the chips'
part and its verdict is that part's, with where each check ran in its record (``where``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from conformance._src.calling import chips as chip
from conformance._src.calling.calls import finished
from conformance._src.contract.catalogue import CheckFailure, KitError, check
from conformance._src.contract.messages import one_line
from conformance._src.declared import draw
from conformance._src.declared.contract import NUMPY
from conformance._src.declared.draw import DEVICE, UNCOMMITTED, Call
from conformance._src.library.assertions import AssertionFailed, assert_values_close
from conformance._src.running.declared_checks import tolerance_of
from conformance._src.running.kit import Kit

# A chips' part's checks whose verdict sinks the run, and those that only say it could not judge.
_BROKEN = ("failed", "crashed")
_KIT = ("kit error",)
DEADLINE_CALLS = 30  # platform.chips waits this many --call-timeouts for the chips' part


@check(
    "platform.agrees",
    "the chips' result equals the function's own on CPU devices for the same inputs, "
    "within the contract's tolerance",
    part="chip",
)
def platform_agrees(kit: Kit, _: None) -> int:
    cpu = jax.devices("cpu")

    def body(call: Call) -> None:
        _, result = kit.result(call)
        on_cpu, mesh = _on_cpu(kit, call, cpu)
        try:
            assert_values_close(
                _host(result),
                _host(on_cpu),
                rtol=tolerance_of(call, "rtol"),
                atol=tolerance_of(call, "atol"),
            )
        except AssertionFailed as failed:
            kit.fail(
                f"the chips' result differs from the CPU's: {failed.summary}",
                call,
                expected=f"the function's own result on {_devices_text(mesh)}: {failed.expected}",
                got=f"on {_devices_text(call.mesh)}: {failed.got}",
                hint="the chip computes this otherwise than the CPU: a lower precision (on TPU a "
                "float32 matmul runs in bfloat16 passes unless precision= or "
                "jax.default_matmul_precision says otherwise), subnormals or a reduction order; "
                "where that difference is allowed, the contract's rtol/atol must say so",
            )

    return kit.search(partial(draw.calls, kit.contract), body)


def _devices_text(mesh: Mesh) -> str:
    first = mesh.devices.flat[0]
    return f"{mesh.size} {first.platform} device(s), mesh shape {dict(mesh.shape)}"


def _host(result: Any) -> Any:
    return jax.tree_util.tree_map(np.asarray, result)


def _on_cpu(kit: Kit, call: Call, cpu: list[Any]) -> tuple[Any, Mesh]:
    """The function's result for the call's values on ``call.mesh``'s shape of CPU devices, each
    argument as it came (NumPy, uncommitted on the first CPU device, committed to that device, or
    laid out as it was over the CPU mesh), under ``jax.default_device`` of that device."""
    shape = call.mesh.devices.shape
    mesh = Mesh(np.array(cpu[: call.mesh.size]).reshape(shape), call.mesh.axis_names)
    kwargs = call.keywords()
    if "mesh" in kwargs and kwargs["mesh"] is not None:
        kwargs["mesh"] = mesh
    impl = kit.impl

    def argument(host: np.ndarray, placed: draw.Placed) -> Any:
        if placed.kind == NUMPY:
            return np.array(host)
        if placed.kind == UNCOMMITTED:
            return jax.device_put(np.array(host))  # the default device: the first CPU one
        if placed.kind == DEVICE or placed.spec is None:
            return jax.device_put(np.array(host), cpu[0])
        return jax.device_put(np.array(host), NamedSharding(mesh, placed.spec))

    def one() -> Any:
        with jax.default_device(cpu[0]):
            args = [argument(h, p) for h, p in zip(call.hosts, call.placements, strict=True)]
            return finished(impl(*args, **kwargs))

    outcome = kit.run(call, one)
    if outcome.error is not None:
        kit.fail(
            "the same inputs on CPU devices raised an exception where the chips gave a result",
            call,
            expected=f"a result on {_devices_text(mesh)}, as on the chips",
            got=one_line(f"{type(outcome.error).__name__}: {outcome.error}"),
            hint="the function must take the same inputs on CPU devices: look for a device "
            "platform or kind it reads",
        )
    return outcome.result, mesh


@check(
    "platform.chips",
    "the accelerator run's chips' part: every check judged on the chips passes there, platform.agrees too",
    part="accelerator",
)
def platform_chips(kit: Kit, _: None) -> int:
    where = chip.folder()
    if where is None:  # run_part said so: the environment carries it
        raise KitError("conformance: the chips' part of this accelerator run has no folder")
    # Its own calls each end at --call-timeout; the whole part, at this many of them.
    deadline = DEADLINE_CALLS * kit.call_timeout
    part = chip.wait(where, deadline=deadline)
    record = kit.records[kit.check_id]
    record.where = {c["id"]: _status_text(c) for c in part.checks}
    if part.returncode is None:
        raise CheckFailure(
            f"[platform.chips] the chips' part on {part.platform} did not end within {deadline:g} s "
            f"({DEADLINE_CALLS} x --call-timeout), and was ended: a call that hangs holding the GIL, "
            f"or a run that long on the chips\n\nits output ended:\n{part.output}"
        )
    if part.verdict is None:
        raise CheckFailure(
            f"[platform.chips] the chips' part on {part.platform} ended without a report (exit status "
            f"{part.returncode}): the implementation ended its process, or the chip was not "
            f"free\n\nits output ended:\n{part.output}"
        )
    broken = [c for c in part.checks if c["status"] in _BROKEN]
    if broken:
        blocks = "\n\n".join(f"on {part.devices}:\n{c['message']}" for c in broken)
        raise CheckFailure(
            f"[platform.chips] {len(broken)} check(s) failed on the chips: "
            f"{', '.join(c['id'] for c in broken)}\n\n{blocks}"
        )
    errors = [c for c in part.checks if c["status"] in _KIT]
    if errors or part.returncode not in (0, 2):
        said = errors[0]["message"] if errors else part.output
        raise KitError(f"conformance: the chips' part on {part.platform} could not judge: {said}")
    return len(part.checks)


def _status_text(found: dict[str, Any]) -> str:
    status = str(found["status"])
    if status == "passed":
        return status
    first = (str(found.get("message") or "").strip().splitlines() or [""])[0]
    first = first.removeprefix(f"{status}: ")  # a skip's reason starts with its status
    return f"{status}: {first}" if first else status
