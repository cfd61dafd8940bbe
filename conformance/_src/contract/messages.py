"""The words of a failure: the first line of an error, and the message block a failed check raises.

A block names the check, says what failed, shows the input (or the history of calls), what was
expected, what came, a hint that fits, and the command that reruns exactly that input.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from conformance._src.contract import jax_bugs
from conformance._src.declared.terms import data_axis_size
from conformance._src.inputs.case import UNCOMMITTED, Case, describe_placement

if TYPE_CHECKING:
    from conformance._src.declared.draw import Call


def one_line(text: str, limit: int = 600) -> str:
    """The first line of ``text``; a long one ends at a sentence or word boundary, marked, never mid-word."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    if len(line) <= limit:
        return line
    cut = line[:limit]
    end = max(cut.rfind(". "), cut.rfind("; "))
    if end < limit // 2:
        end = cut.rfind(" ")
    return cut[: end + 1].rstrip() + " [...]"


class Described(Protocol):
    """An input that names itself in words (a ``Case``, a declared contract's ``Call``)."""

    def describe(self) -> str: ...


def block(
    check_id: str,
    summary: str,
    *,
    history: Sequence[Described] | None,
    case: Described | None,
    expected: str,
    got: str,
    hint: str | None,
    rerun: str,
) -> str:
    """A failed check's message: the input (or the history of calls, the last one failing),
    what was expected, what came, the hint and the rerun command, one labelled line each."""
    lines = [f"[{check_id}] {summary}"]
    if history:
        lines.append(f"  history:  {len(history)} call(s) in this order; the last one failed:")
        lines += [f"    {k}. {step.describe()}" for k, step in enumerate(history, 1)]
    elif case is not None:
        lines.append(f"  input:    {case.describe()}")
    lines += [f"  expected: {expected}", f"  got:      {got}"]
    if hint:
        lines.append(f"  hint:     {hint}")
    lines.append(f"  rerun:    {rerun}")
    return "\n".join(lines)


def rerun_command(
    spec: str,
    contract: str,
    devices: int,
    call_timeout: float,
    check_id: str,
    token: str | None,
    *,
    seed: int | None = None,
    chips: tuple[str, int] | None = None,
) -> str:
    """The command that reruns one check, on exactly one input or history where ``token`` names
    it, its search seeded with ``seed`` where given; ``chips``: in an accelerator run's chips'
    part (calling/chips.py), its ``JAX_PLATFORMS`` and forced CPU devices, that part alone."""
    args = [
        "python",
        "-m",
        "pytest",
        "--pyargs",
        "conformance",
        "--impl",
        spec,
        "--contract",
        contract,
        "--devices",
        str(devices),
        "--call-timeout",
        f"{call_timeout:g}",
        "--check",
        check_id,
    ]
    if seed is not None:
        args.append(f"--hypothesis-seed={seed}")
    if token is not None:
        args += ["--case", token]
    if chips is not None:
        args[5:5] = ["-n", "0", "--chip-part", str(chips[1])]
        return f"JAX_PLATFORMS={shlex.quote(chips[0])} {shlex.join(args)}"
    return shlex.join(args)


def hint_for_raised(case: Case, error: BaseException) -> str:
    """The hint for an implementation that raised on an input of the contract's domain."""
    said = str(error).lower()
    if isinstance(error, TypeError) and "mesh" in said:
        return "it does not seem to accept the mesh keyword (pjit_double(x, *, mesh=None))"
    if case.placement != UNCOMMITTED and any(w in said for w in ("device", "sharding", "committed")):
        if jax_bugs.hitting(case) is jax_bugs.CROSS_PROCESS_PUT:  # JAX's device_put refuses it here
            return (
                f"x was {describe_placement(case.placement)}: this process's own copy of the values, "
                "and the target layout has devices of another process, where this JAX's device_put "
                "does not move it; every process holds the same values, so read them "
                "(np.asarray(x)) and make the target layout's shards with "
                "jax.make_array_from_callback(x.shape, target_sharding, lambda i: host[i])"
            )
        return (
            f"x was {describe_placement(case.placement)}: an input already placed elsewhere must be "
            f"accepted; jax.device_put(x, target_sharding) moves it before the jitted call"
        )
    if (
        isinstance(error, ValueError)
        and case.n % data_axis_size(case.mesh) == 0
        and any(w in said for w in ("divis", "divid", "multiple", "shape"))
    ):
        return (
            f"the data axis has {data_axis_size(case.mesh)} device(s), which divides length {case.n}: "
            f"only mesh.shape['data'] counts, not every device of the mesh"
        )
    return "it must return the doubled vector for every input in the contract's domain"


def hint_for_raised_call(call: Call, error: BaseException) -> str:
    """The hint for a function that raised on a call of its declared contract's domain."""
    said = str(error).lower()
    placed = [
        (arg.name, p)
        for arg, p in zip(call.contract.arguments, call.placements, strict=True)
        if p.kind not in ("layouts", "numpy")
    ]
    if placed and any(w in said for w in ("device", "sharding", "memory", "committed")):
        name, where = placed[0]
        return (
            f"{name} was {where.describe(call.mesh)}: an argument placed anywhere its contract "
            f"allows must be accepted; jax.device_put({name}, NamedSharding(mesh, layout)) moves it "
            f"before the jitted call"
        )
    return (
        f"every input of the contract's domain must give a result ({call.contract.name}); where the "
        "call passes when rerun alone, state that earlier calls left made it raise (a cache of meshes "
        "or jitted functions keyed on too little hands it another mesh's: see fn.histories)"
    )
