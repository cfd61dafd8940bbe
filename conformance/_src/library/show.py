"""Meshes and shardings as text a person can paste back: every message of the library and every
example Hypothesis prints shows a mesh by its device ids, so the failing one can be rebuilt.

JAX's own ``repr(mesh)`` gives the axis sizes and names but not which devices, in which order;
most drawn meshes are shuffled subsets of the devices, so that is not enough to rebuild one::

    >>> mesh_text(mesh)
    "mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))"

``conformance.devices.mesh_from_ids`` (``mesh_from_ids`` here) makes that mesh again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def mesh_from_ids(
    ids: Sequence[Any] | np.ndarray, axis_names: Sequence[str], *, axis_types: Sequence[Any] | None = None
) -> Mesh:
    """The mesh whose devices, by id, are laid out as ``ids`` (nested lists, one level per axis)
    with ``axis_names`` (and ``axis_types``, JAX's default if not given): the mesh a message or a
    falsifying example printed."""
    grid = np.asarray(ids)
    if grid.dtype.kind not in "iu":
        raise TypeError(f"ids={ids!r} must be device ids (integers), nested one level per axis")
    names = tuple(axis_names)
    if grid.ndim != len(names):
        raise TypeError(f"ids has {grid.ndim} dimension(s) but axis_names={names!r} names {len(names)}")
    by_id = {int(d.id): d for d in jax.devices()}
    missing = sorted({int(i) for i in grid.flat} - set(by_id))
    if missing:
        raise ValueError(f"no device has id {missing[0]} (the devices' ids: {sorted(by_id)})")
    devices = np.empty(grid.shape, dtype=object)
    for index, i in np.ndenumerate(grid):
        devices[index] = by_id[int(i)]
    if axis_types is None:
        return Mesh(devices, names)
    return Mesh(devices, names, axis_types=tuple(axis_types))


def make_mesh(ids: list[int], shape: tuple[int, ...], axis_names: tuple[str, ...]) -> Mesh:
    """The mesh of the devices of ``ids`` (in that order, flat) laid out as ``shape``."""
    by_id = {int(d.id): d for d in jax.devices()}
    return Mesh(np.array([by_id[i] for i in ids], dtype=object).reshape(shape), axis_names)


def mesh_ids(mesh: Any) -> list[Any]:
    """The mesh's device ids as nested lists, one level per axis."""
    ids: list[Any] = np.vectorize(lambda d: int(d.id), otypes=[np.int64])(mesh.devices).tolist()
    return ids


def mesh_text(mesh: Any) -> str:
    """``mesh_from_ids([[3, 1], [0, 2]], ('data', 'model'))``: the call that rebuilds ``mesh``.
    An abstract mesh (no devices) shows its axis sizes and names."""
    if not isinstance(mesh, Mesh):  # an AbstractMesh has no devices
        return repr(mesh)
    types = tuple(getattr(mesh, "axis_types", ()) or ())
    auto = all(str(t).endswith("Auto") for t in types)
    names = [f"AxisType.{t.name}" for t in types]
    shown = "" if auto else ", axis_types=(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"
    return f"mesh_from_ids({mesh_ids(mesh)}, {tuple(mesh.axis_names)!r}{shown})"


def spec_text(spec: PartitionSpec) -> str:
    return "P(" + ", ".join(repr(part) for part in spec) + ")"


def sharding_text(sharding: Any) -> str:
    """A sharding with its devices: ``NamedSharding(mesh_from_ids(...), P('data', None))`` (and its
    memory kind when it is not the device's own); other kinds of sharding with their device ids."""
    if isinstance(sharding, NamedSharding):
        memory = getattr(sharding, "memory_kind", None)
        kind = f", memory_kind={memory!r}" if memory not in (None, "device") else ""
        return f"NamedSharding({mesh_text(sharding.mesh)}, {spec_text(sharding.spec)}{kind})"
    device_set = getattr(sharding, "device_set", None)
    if device_set is None:
        return repr(sharding)
    ids = sorted(int(d.id) for d in device_set)
    text = repr(sharding)
    return text if "id=" in text or "device_ids" in text else f"{text} on devices {ids}"
