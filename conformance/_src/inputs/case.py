"""One example: the input vector, the mesh, how the mesh is passed, where x lives.

A ``Case`` holds host data and a mesh; ``make_input`` turns it into the ``x``
handed to the implementation.  ``encode``/``decode`` give the compact token
that ``--case`` takes, so a failure message can print a command that reruns
exactly that example.
"""

from __future__ import annotations

import base64
import json
import weakref
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

from conformance._src.declared.draw import NUMPY_FORMS, numpy_form
from conformance._src.declared.draw import may_refuse as draw_may_refuse
from conformance._src.library.show import make_mesh
from conformance._src.library.values import TILE, tile_edits

MeshArg = Literal["omit", "none", "mesh"]

# Where the input lives before the call:
#   ("uncommitted",)                 on the default device, not committed to it
#   ("numpy",)                       a NumPy array, contiguous and writeable
#   ("numpy", form)                  a NumPy array as users also have them (NUMPY_FORMS)
#   ("device", id)                   committed to one device
#   ("sharded", (ids...), "split")   split over a 1-D mesh of those devices
#   ("sharded", (ids...), "replicated")
#   ("target",)                      committed in the target layout already (an earlier result)
#   ("memory", kind, "target")       the target layout, in another memory kind (pinned_host, ...)
#   ("memory", kind, id)             committed to device id, in another memory kind
#   ("result", k)                    the result call k of the history returned, passed back as x
#                                    (histories only: history.py; the caller still holds it)
Placement = tuple[Any, ...]
UNCOMMITTED: Placement = ("uncommitted",)
TARGET: Placement = ("target",)


@dataclass(frozen=True, eq=False)
class Case:
    """One example for a ``pjit_double``-like function: what ``strategies.cases`` draws.

    * ``values``: the input vector on the host (1-D NumPy array; its dtype is the case's);
    * ``mesh``: the mesh to pass, or ``None``;
    * ``mesh_arg``: how the mesh is passed: ``"omit"`` (``f(x)``), ``"none"``
      (``f(x, mesh=None)``) or ``"mesh"`` (``f(x, mesh=mesh)``): ``mesh_kwargs()``;
    * ``placement``: where ``x`` lives before the call (the kinds at the top
      of this module); ``make_input()`` builds that ``x``, a fresh one each time;
    * ``clocks_ahead``: seconds that the clocks the implementation reads during the call
      (``time.time``, ``time.monotonic``, ``time.perf_counter`` and their ``_ns`` forms) stand
      ahead of the true time: time passing between calls of a history, as it sees it (0: none);
    * ``under``: the context the call is made in (``UNDER``): none, ``("default_device", id)``
      for ``jax.default_device(device id)``, or ``("set_mesh",)`` for ``jax.set_mesh(mesh)``.

    >>> from conformance import strategies as cst
    >>> @given(cst.cases(contract="full"))  # doctest: +SKIP
    ... def test_mine(case):
    ...     result = my_double(case.make_input(), **case.mesh_kwargs())
    ...     assert_values_equal(result, 2 * case.values)
    """

    values: np.ndarray
    mesh: Mesh | None = None
    mesh_arg: MeshArg = "omit"
    placement: Placement = field(default=UNCOMMITTED)
    clocks_ahead: int = 0
    under: tuple[Any, ...] = ()

    def make_input(self) -> Any:
        """The ``x`` this case describes, fresh each time (``make_input(case)``)."""
        return make_input(self)

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def mesh_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the call: none, ``mesh=None`` or ``mesh=m``."""
        if self.mesh_arg == "omit":
            return {}
        return {"mesh": self.mesh if self.mesh_arg == "mesh" else None}

    def describe(self) -> str:
        """The input in words, for failure messages."""
        text = (
            f"length {self.n}, dtype {self.dtype}, mesh {describe_mesh(self.mesh)}, "
            f"called with {call_text(self)}, x {describe_placement(self.placement)}"
        )
        if self.under:
            text += f", called under {describe_under(self.under)}"
        if self.clocks_ahead:
            text += f", the clocks it reads {describe_seconds(self.clocks_ahead)} ahead (time passed)"
        return text

    def __repr__(self) -> str:
        return f"Case({self.describe()})"


def device_ids(mesh: Mesh) -> list[int]:
    return [int(d.id) for d in mesh.devices.flat]


def describe_mesh(mesh: Mesh | None) -> str:
    if mesh is None:
        return "default (first device only)"
    shape = " x ".join(f"{name}={size}" for name, size in mesh.shape.items())
    return f"{shape} over devices {device_ids(mesh)}"


def call_text(case: Case) -> str:
    if case.mesh_arg == "omit":
        return "pjit_double(x)"
    return f"pjit_double(x, mesh={'None' if case.mesh_arg == 'none' else 'mesh'})"


def describe_under(under: tuple[Any, ...]) -> str:
    if under[0] == "default_device":
        return f"jax.default_device(device {under[1]})"
    return "jax.set_mesh(mesh), the call's own mesh"


def describe_seconds(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def describe_placement(placement: Placement) -> str:
    kind = placement[0]
    if kind == "result":
        return f"the result call {placement[1]} returned, passed back (the caller still holds it)"
    if kind == "uncommitted":
        return "uncommitted, on the default device (as jnp.asarray makes it)"
    if kind == "numpy":
        form = placement[1] if len(placement) > 1 else ""
        return {
            "": "a NumPy array",
            "strided": "a NumPy view of every other element of a larger array (x = a[::2])",
            "reversed": "a reversed NumPy view (x = a[::-1])",
            "byteswapped": "a NumPy array in non-native byte order (x.dtype.isnative is False)",
            "readonly": "a read-only NumPy array (x.flags.writeable is False)",
        }[form]
    if kind == "target":
        return "committed in the target layout already (as an earlier result is)"
    if kind == "device":
        return f"committed to device {placement[1]}"
    if kind == "memory":
        where = "in the target layout" if placement[2] == "target" else f"to device {placement[2]}"
        return f"committed {where}, in memory kind {placement[1]!r} (not the device's default memory)"
    return f"committed {placement[2]} over devices {list(placement[1])}"


def make_input(case: Case) -> Any:
    """The ``x`` to pass: fresh each time, so one call cannot spoil another."""
    if jax.process_count() > 1:  # every placement class, as each process can hold it
        return _global_input(case)
    # A copy each time: on CPU, device_put may make the host array's memory
    # the device buffer itself, and the case's values are kept and shared by
    # later checks (pool.py), so no call may get hold of them.  And not
    # jnp.asarray for the uncommitted input: it converts through a jitted op,
    # which compiles once per shape and dtype.
    host = case.values.copy()
    kind = case.placement[0]
    if kind == "result":
        raise ValueError("a result passed back is the history's to give (history.py), not made anew")
    if kind == "numpy":
        return numpy_form(host, case.placement[1] if len(case.placement) > 1 else "")
    if kind == "uncommitted":
        return jax.device_put(host)
    if kind == "target":
        from conformance._src.declared.terms import target_sharding

        return jax.device_put(host, target_sharding(case.mesh))
    by_id = {int(d.id): d for d in jax.devices()}
    if kind == "device":
        return jax.device_put(host, by_id[case.placement[1]])
    if kind == "memory":
        from conformance._src.declared.terms import target_sharding

        _, memory, where = case.placement
        if where == "target":
            return jax.device_put(host, target_sharding(case.mesh).with_memory_kind(memory))
        return jax.device_put(host, jax.sharding.SingleDeviceSharding(by_id[where], memory_kind=memory))
    ids = list(case.placement[1])
    mesh = make_mesh(ids, (len(ids),), ("p",))
    spec = PartitionSpec("p") if case.placement[2] == "split" else PartitionSpec()
    return jax.device_put(host, NamedSharding(mesh, spec))


# -- inputs across processes ---------------------------------------------------------
def _global_input(case: Case) -> Any:
    """``make_input``'s ``x`` in a multi-process run: every placement class, as each process holds it.

    NumPy (every form) and uncommitted arrays are what every process passes alike: the same
    values, whole, on the host or on its own default device.  A committed input is a global
    array where JAX can move it across processes (the target's own device set: in the target
    layout, committed to the one device of a one-device target, or laid out over the target's
    devices in another order or replicated -- the "elsewhere" an implementation must move,
    and which ``np.asarray`` cannot read whole on any process); otherwise each process commits
    its whole copy to one of its own devices (JAX moves no array between devices of different
    processes that is not over the target's devices).  Each copies the case's values.
    """
    from conformance._src.declared.terms import data_axis_size, target_sharding

    values = case.values
    kind = case.placement[0]
    if kind == "numpy":
        return numpy_form(values.copy(), case.placement[1] if len(case.placement) > 1 else "")
    target = target_sharding(case.mesh)
    ids = [int(d.id) for d in target.mesh.devices.flat]
    if kind == "uncommitted":
        if len(ids) == 1 and target.mesh.devices.flat[0].process_index != jax.process_index():
            # JAX 0.10.2's jit, given an uncommitted array for a one-device layout on another
            # process's device, can end the process (SIGSEGV) on the second call: the array
            # committed to that device instead, the one input JAX can move there.
            return _global_array(values, SingleDeviceSharding(target.mesh.devices.flat[0]))
        return jax.device_put(values.copy())
    if case.n % data_axis_size(case.mesh):  # no target layout: replicated over every device
        return _global_array(values, NamedSharding(Mesh(np.array(jax.devices()), ("all",)), PartitionSpec()))
    if kind == "target":
        return _global_array(values, target)
    own = _own_copy(case)
    if own is not None:
        return jax.device_put(values.copy(), own)
    if kind == "memory":  # in the target layout, in another memory kind
        return _global_array(values, target.with_memory_kind(case.placement[1]))
    if kind == "device":  # the one device of a one-device target
        return _global_array(values, SingleDeviceSharding(target.mesh.devices.flat[0]))
    # "sharded": over the target's devices, those the placement names first, in its order
    named = [i for i in case.placement[1] if i in ids]
    order = named + [i for i in ids if i not in named]
    if order == ids and case.placement[2] == "split":
        order = order[1:] + order[:1]  # never the target layout itself
    by_id = {int(d.id): d for d in jax.devices()}
    split = case.placement[2] == "split" and case.n % len(order) == 0
    mesh = Mesh(np.array([by_id[i] for i in order]), ("p",))
    return _global_array(values, NamedSharding(mesh, PartitionSpec("p") if split else PartitionSpec()))


def _own_copy(case: Case) -> SingleDeviceSharding | None:
    """Where this process commits its own whole copy of the values, for a committed placement
    no global array can give (``_global_input``); None for every other input."""
    from conformance._src.declared.terms import data_axis_size, target_sharding

    kind = case.placement[0]
    if kind not in ("device", "memory", "sharded") or case.n % data_axis_size(case.mesh):
        return None
    target = target_sharding(case.mesh)
    if kind == "memory":
        memory, where = case.placement[1], case.placement[2]
        return None if where == "target" else SingleDeviceSharding(_own(int(where)), memory_kind=memory)
    if kind == "device":
        ids = [int(d.id) for d in target.mesh.devices.flat]
        return None if ids == [int(case.placement[1])] else SingleDeviceSharding(_own(int(case.placement[1])))
    if {d.process_index for d in target.mesh.devices.flat} != set(range(jax.process_count())):
        # JAX moves an array between layouts of devices some process lacks by aborting there
        # (0.10.2): each process's whole copy, committed to its own device in the placement's place.
        return SingleDeviceSharding(_own(int(case.placement[1][0])))
    return None


def process_copy_elsewhere(case: Case) -> bool:
    """Whether ``case``'s x is, in this multi-process run, this process's own copy committed to one
    of its devices while the target layout has devices of another process: an array JAX's
    ``device_put`` moves no further than this process's devices (jax_bugs.CROSS_PROCESS_PUT)."""
    if jax.process_count() < 2 or _own_copy(case) is None:
        return False
    from conformance._src.declared.terms import target_sharding

    return not target_sharding(case.mesh).is_fully_addressable


def _global_array(values: np.ndarray, sharding: Any) -> jax.Array:
    """The global array of ``values`` in ``sharding``: each process makes its own shards (copies)."""
    return jax.make_array_from_callback(
        values.shape, sharding, lambda index: values[index].copy(), dtype=values.dtype
    )


def _own(device_id: int) -> Any:
    """The device ``device_id`` if this process has it, else this process's device in its place."""
    local = jax.local_devices()
    mine = {int(d.id): d for d in local}
    if device_id in mine:
        return mine[device_id]
    theirs = [int(d.id) for d in jax.devices() if d.process_index == _process_of(device_id)]
    return local[sorted(theirs).index(device_id) % len(local)]


def _process_of(device_id: int) -> int:
    return next(int(d.process_index) for d in jax.devices() if int(d.id) == device_id)


def may_refuse(case: Case, error: BaseException) -> bool:
    """Whether raising ``error`` for ``case`` is a refusal the contract allows (draw.may_refuse:
    a NumPy array in the other byte order, refused with a TypeError or ValueError)."""
    form = case.placement[1] if case.placement[0] == "numpy" and len(case.placement) > 1 else ""
    return isinstance(form, str) and draw_may_refuse(form, case.dtype, error)


# Long vectors are a block of TILE values repeated, with a few others written
# over it (strategies.values; TILE is the library's): their tokens hold the block and those few.
_MAX_EDITS = 256


def _values_field(values: np.ndarray) -> dict[str, Any]:
    n = len(values)
    if n > 4 * TILE:
        best: tuple[int, np.ndarray, np.ndarray] | None = None
        for k in range(3):  # a block every position agrees with but for a few: one of the first three
            block = values[k * TILE : (k + 1) * TILE]
            edits = tile_edits(values, block)  # word by word: cheap past 32 MiB
            if best is None or len(edits) < best[0]:
                best = (len(edits), block, edits)
            if len(edits) <= _MAX_EDITS:
                break  # short enough: the first block that makes a token is as good as any
        assert best is not None
        _, block, edits = best
        if len(edits) <= _MAX_EDITS:
            return {
                "n": n,
                "tile": base64.b64encode(block.tobytes()).decode(),
                "edits": [[int(i), base64.b64encode(values[i : i + 1].tobytes()).decode()] for i in edits],
            }
    return {"values": base64.b64encode(values.tobytes()).decode()}


_tokens: weakref.WeakKeyDictionary[Case, str] = weakref.WeakKeyDictionary()


def encode(case: Case) -> str:
    """A compact, copy-pasteable token for ``--case`` (made once per case: every call of an
    example under supervision names it in the call log)."""
    token = _tokens.get(case)
    if token is None:
        token = _tokens[case] = _encode(case)
    return token


def _encode(case: Case) -> str:
    return _pack(_data(case))


def _pack(data: Any) -> str:
    raw = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
    return base64.urlsafe_b64encode(raw).decode()


def _unpack(token: str) -> Any:
    try:
        return json.loads(zlib.decompress(base64.urlsafe_b64decode(token.encode("ascii"))))
    except (ValueError, zlib.error, UnicodeError) as exc:  # binascii.Error is a ValueError
        raise CaseTokenError(f"not a token the kit printed ({type(exc).__name__})") from None


def encode_history(cases: list[Case]) -> str:
    """One token for a whole history of calls, in order (``--case`` of a history check)."""
    return _pack({"history": [_data(case) for case in cases]})


def _data(case: Case) -> dict[str, Any]:
    mesh = case.mesh
    return {
        "dtype": str(case.dtype),
        **_values_field(case.values),
        "mesh": None
        if mesh is None
        else {"ids": device_ids(mesh), "shape": list(mesh.devices.shape), "axes": list(mesh.axis_names)},
        "mesh_arg": case.mesh_arg,
        "placement": list(case.placement),
        **({"clocks_ahead": case.clocks_ahead} if case.clocks_ahead else {}),
        **({"under": list(case.under)} if case.under else {}),
    }


class CaseTokenError(ValueError):
    """A ``--case`` token that does not describe a case; the message is one line."""


@dataclass(frozen=True, eq=False)
class CaseData:
    """A decoded token before its mesh is made: what can be known without devices."""

    values: np.ndarray
    mesh_ids: tuple[int, ...] | None  # None: no mesh
    mesh_shape: tuple[int, ...]
    mesh_axes: tuple[str, ...]
    mesh_arg: MeshArg
    placement: Placement
    clocks_ahead: int = 0
    under: tuple[Any, ...] = ()

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def device_ids(self) -> list[int]:
        """Every device the case names: its mesh's and its placement's."""
        ids = list(self.mesh_ids or ())
        if self.under[:1] == ("default_device",):
            ids.append(self.under[1])
        if self.placement[0] == "device" or (self.placement[0] == "memory" and self.placement[2] != "target"):
            ids.append(self.placement[-1])
        elif self.placement[0] == "sharded":
            ids.extend(self.placement[1])
        return ids


_MESH_ARGS = ("omit", "none", "mesh")


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise CaseTokenError(f"{what} is not a list of device ids")
    return tuple(value)


def _placement(raw: Any) -> Placement:
    if not isinstance(raw, list) or not raw:
        raise CaseTokenError("its placement is not a list")
    kind = raw[0]
    if kind in ("uncommitted", "numpy", "target") and len(raw) == 1:
        return (kind,)
    if kind == "numpy" and len(raw) == 2 and raw[1] in NUMPY_FORMS:
        return ("numpy", raw[1])
    if (
        kind in ("device", "result")
        and len(raw) == 2
        and type(raw[1]) is int
        and raw[1] >= (kind == "result")
    ):
        return (kind, raw[1])
    if kind == "memory" and len(raw) == 3 and isinstance(raw[1], str):
        if raw[2] == "target" or (type(raw[2]) is int and raw[2] >= 0):
            return ("memory", raw[1], raw[2])
    if kind == "sharded" and len(raw) == 3 and raw[2] in ("split", "replicated"):
        ids = _ints(raw[1], "its placement's devices")
        if not ids or len(set(ids)) != len(ids):
            raise CaseTokenError("its placement names no device, or one device twice")
        return ("sharded", ids, raw[2])
    raise CaseTokenError(f"its placement {raw!r} is none the kit knows")


def _array(text: Any, dtype: np.dtype) -> np.ndarray:
    try:
        raw = base64.b64decode(str(text), validate=True)
    except ValueError:
        raise CaseTokenError("its values are not base64") from None
    if dtype.hasobject or not dtype.itemsize or len(raw) % dtype.itemsize:
        raise CaseTokenError(f"its values are {len(raw)} bytes, not a whole number of {dtype} elements")
    return np.frombuffer(raw, dtype=dtype).copy()


def _values(data: dict[str, Any], dtype: np.dtype) -> np.ndarray:
    if "values" in data:
        return _array(data["values"], dtype)
    n, edits = data["n"], data["edits"]
    # At most the longest vector the kit makes: 2**25 + 8 int8, past 32 MiB (Schedule.huge_cases).
    if type(n) is not int or not 0 <= n <= 2**25 + 8 or not isinstance(edits, list):
        raise CaseTokenError("its long vector is not one the kit printed")
    values = np.resize(_array(data["tile"], dtype), n)
    for edit in edits:
        if not (isinstance(edit, list) and len(edit) == 2 and type(edit[0]) is int and 0 <= edit[0] < n):
            raise CaseTokenError("its long vector is not one the kit printed")
        one = _array(edit[1], dtype)
        if one.shape != (1,):
            raise CaseTokenError("its long vector is not one the kit printed")
        values[edit[0]] = one[0]
    return values


def parse(token: str) -> CaseData:
    """Read a token without making its mesh (no devices needed); ``CaseTokenError`` if it is not one."""
    data = _parse_data(_unpack(token))
    if data.placement[0] == "result":
        raise CaseTokenError("it passes back an earlier call's result: a history token's call, not a case")
    return data


def parse_history(token: str) -> list[CaseData]:
    """Read a history token (``encode_history``) without making meshes; ``CaseTokenError`` if not one."""
    data = _unpack(token)
    if not isinstance(data, dict) or not isinstance(data.get("history"), list) or not data["history"]:
        raise CaseTokenError("not a history token the kit printed (a --case of another check?)")
    steps = [_parse_data(step) for step in data["history"]]
    for k, step in enumerate(steps, 1):
        if step.placement[0] == "result" and step.placement[1] >= k:
            raise CaseTokenError(
                f"its call {k} passes back the result of call {step.placement[1]}, not an earlier one"
            )
    return steps


def _parse_data(data: Any) -> CaseData:
    if not isinstance(data, dict) or not {"dtype", "mesh", "mesh_arg", "placement"} <= data.keys():
        raise CaseTokenError("not a token the kit printed (fields are missing)")
    if "values" not in data and not {"n", "tile", "edits"} <= data.keys():
        raise CaseTokenError("not a token the kit printed (its values are missing)")
    try:
        dtype = np.dtype(jnp.dtype(data["dtype"]))
    except (TypeError, ValueError):
        raise CaseTokenError(f"it names an unknown dtype {data['dtype']!r}") from None
    values = _values(data, dtype)
    if data["mesh_arg"] not in _MESH_ARGS:
        raise CaseTokenError(f"its mesh argument {data['mesh_arg']!r} is not one of {', '.join(_MESH_ARGS)}")
    m = data["mesh"]
    ids: tuple[int, ...] | None = None
    shape: tuple[int, ...] = ()
    axes: tuple[str, ...] = ()
    if m is not None:
        if not isinstance(m, dict) or not {"ids", "shape", "axes"} <= m.keys():
            raise CaseTokenError("its mesh is not a mesh the kit printed")
        ids = _ints(m["ids"], "its mesh's devices")
        shape = _ints(m["shape"], "its mesh's shape")
        if not isinstance(m["axes"], list) or not all(isinstance(a, str) for a in m["axes"]):
            raise CaseTokenError("its mesh's axis names are not strings")
        axes = tuple(m["axes"])
        if (
            not ids
            or len(set(ids)) != len(ids)
            or len(shape) != len(axes)
            or len(set(axes)) != len(axes)
            or int(np.prod(shape)) != len(ids)
        ):
            raise CaseTokenError(
                f"its mesh (devices {list(ids)}, shape {list(shape)}, axes {list(axes)}) is not one"
            )
    if (m is None) != (data["mesh_arg"] != "mesh"):
        raise CaseTokenError("its mesh and its mesh argument disagree")
    clocks = data.get("clocks_ahead", 0)
    if type(clocks) is not int or clocks < 0:
        raise CaseTokenError("its clocks are not a whole number of seconds ahead")
    under = data.get("under", [])
    if not (
        under == []
        or (
            isinstance(under, list)
            and len(under) == 2
            and under[0] == "default_device"
            and type(under[1]) is int
        )
        or (under == ["set_mesh"] and m is not None)
    ):
        raise CaseTokenError(f"its context {under!r} is none the kit knows")
    return CaseData(
        values, ids, shape, axes, data["mesh_arg"], _placement(data["placement"]), clocks, tuple(under)
    )


def decode(token: str) -> Case:
    """The case of a token; its mesh is made from ``jax.devices()``.

    ``CaseTokenError`` if the token is not one, or names a device that is not there.
    """
    return _made(parse(token))


def decode_history(token: str) -> list[Case]:
    """The calls of a history token, in order, their meshes made from ``jax.devices()``."""
    return [_made(data) for data in parse_history(token)]


def _made(data: CaseData) -> Case:
    available = {int(d.id) for d in jax.devices()}
    missing = sorted(set(data.device_ids()) - available)
    if missing:
        raise CaseTokenError(
            f"it uses device {missing[0]}, but the devices are {sorted(available)} "
            f"(it needs {max(data.device_ids()) + 1} devices: --devices)"
        )
    mesh = None
    if data.mesh_ids is not None:
        mesh = make_mesh(list(data.mesh_ids), data.mesh_shape, data.mesh_axes)
    return Case(data.values, mesh, data.mesh_arg, data.placement, data.clocks_ahead, data.under)
