"""One example: the input vector, the mesh, how the mesh is passed, where x lives.

A ``Case`` holds host data and a mesh; ``make_input`` turns it into the ``x``
handed to the implementation.  ``encode``/``decode`` give the compact token
that ``--case`` takes, so a failure message can print a command that reruns
exactly that example.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MeshArg = Literal["omit", "none", "mesh"]

# Where the input lives before the call:
#   ("uncommitted",)                 on the default device, not committed to it
#   ("numpy",)                       a NumPy array
#   ("device", id)                   committed to one device
#   ("sharded", (ids...), "split")   split over a 1-D mesh of those devices
#   ("sharded", (ids...), "replicated")
Placement = tuple[Any, ...]
UNCOMMITTED: Placement = ("uncommitted",)


@dataclass(frozen=True, eq=False)
class Case:
    values: np.ndarray
    mesh: Mesh | None = None
    mesh_arg: MeshArg = "omit"
    placement: Placement = field(default=UNCOMMITTED)

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
        return (
            f"length {self.n}, dtype {self.dtype}, mesh {describe_mesh(self.mesh)}, "
            f"called with {call_text(self)}, x {describe_placement(self.placement)}"
        )

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


def describe_placement(placement: Placement) -> str:
    kind = placement[0]
    if kind == "uncommitted":
        return "uncommitted, on the default device (as jnp.asarray makes it)"
    if kind == "numpy":
        return "a NumPy array"
    if kind == "device":
        return f"committed to device {placement[1]}"
    return f"committed {placement[2]} over devices {list(placement[1])}"


def make_mesh(ids: list[int], shape: tuple[int, ...], axis_names: tuple[str, ...]) -> Mesh:
    by_id = {int(d.id): d for d in jax.devices()}
    return Mesh(np.array([by_id[i] for i in ids], dtype=object).reshape(shape), axis_names)


def make_input(case: Case) -> Any:
    """The ``x`` to pass: fresh each time, so one call cannot spoil another."""
    if jax.process_count() > 1:
        # Across processes only global arrays can enter a computation: every
        # process builds its own shards of the same values, in the target layout.
        from conformance.contract import data_axis_size, target_sharding

        values = case.values
        sharding = target_sharding(case.mesh)
        if case.n % data_axis_size(case.mesh):  # no such layout: replicate over every device
            sharding = NamedSharding(Mesh(np.array(jax.devices()), ("all",)), PartitionSpec())
        return jax.make_array_from_callback(  # copies: see below
            values.shape, sharding, lambda index: values[index].copy(), dtype=values.dtype
        )
    # A copy each time: on CPU, device_put may make the host array's memory
    # the device buffer itself, and the case's values are kept and shared by
    # later checks (pool.py), so no call may get hold of them.  And not
    # jnp.asarray for the uncommitted input: it converts through a jitted op,
    # which compiles once per shape and dtype.
    host = case.values.copy()
    kind = case.placement[0]
    if kind == "numpy":
        return host
    if kind == "uncommitted":
        return jax.device_put(host)
    by_id = {int(d.id): d for d in jax.devices()}
    if kind == "device":
        return jax.device_put(host, by_id[case.placement[1]])
    ids = list(case.placement[1])
    mesh = make_mesh(ids, (len(ids),), ("p",))
    spec = PartitionSpec("p") if case.placement[2] == "split" else PartitionSpec()
    return jax.device_put(host, NamedSharding(mesh, spec))


def encode(case: Case) -> str:
    """A compact, copy-pasteable token for ``--case``."""
    mesh = case.mesh
    data = {
        "dtype": str(case.dtype),
        "values": base64.b64encode(case.values.tobytes()).decode(),
        "mesh": None
        if mesh is None
        else {"ids": device_ids(mesh), "shape": list(mesh.devices.shape), "axes": list(mesh.axis_names)},
        "mesh_arg": case.mesh_arg,
        "placement": list(case.placement),
    }
    raw = zlib.compress(json.dumps(data, separators=(",", ":")).encode(), 9)
    return base64.urlsafe_b64encode(raw).decode()


def decode(token: str) -> Case:
    data = json.loads(zlib.decompress(base64.urlsafe_b64decode(token.encode())))
    dtype = np.dtype(jnp.dtype(data["dtype"]))
    values = np.frombuffer(base64.b64decode(data["values"]), dtype=dtype).copy()
    m = data["mesh"]
    mesh = None if m is None else make_mesh(m["ids"], tuple(m["shape"]), tuple(m["axes"]))
    placement = tuple(tuple(p) if isinstance(p, list) else p for p in data["placement"])
    return Case(values, mesh, data["mesh_arg"], placement)
