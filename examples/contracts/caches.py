"""Caches of jitted functions that go wrong: the state bugs of the example contracts' broken variants.

A sharded function keeps a jitted function per mesh, so that a call on a mesh it has seen compiles
nothing.  ``MeshCache(kind, build)`` is such a cache, wrong in one of seven ways (``KINDS``):

* ``last-only``: keeps only the last mesh's function: a call on an earlier mesh compiles again;
* ``two-meshes``: keeps the two latest meshes' (least recently used out): the third mesh back
  compiles again;
* ``device-set``, ``flat-ids``, ``mesh-shape``, ``axis-names``: keyed on something that does not
  tell two meshes apart (the set of device ids; the ids in flat order; the axis names and sizes;
  the axis names), so a mesh that shares it with an earlier one gets the earlier mesh and its
  function back, and the result is laid out for the earlier mesh;
* ``first-context``: the mesh in effect at its first call (``jax.set_mesh``'s, where one is set)
  is kept and used for every later call: right as long as the process's first call is made
  without a context, wrong ever after where it is not.

``cache(mesh)`` gives ``(mesh it was built for, jitted function)``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import Mesh

KINDS = ("last-only", "two-meshes", "device-set", "flat-ids", "mesh-shape", "axis-names", "first-context")


def _key(kind: str, mesh: Mesh) -> Any:
    ids = tuple(int(d.id) for d in mesh.devices.flat)
    if kind == "device-set":
        return frozenset(ids)
    if kind == "flat-ids":
        return ids
    if kind == "mesh-shape":
        return tuple(mesh.shape.items())
    if kind == "axis-names":
        return tuple(mesh.axis_names)
    return mesh  # last-only, two-meshes: the right key, too few entries


class MeshCache:
    """A cache of ``build(mesh)``, wrong as ``kind`` says."""

    def __init__(self, kind: str, build: Callable[[Mesh], Any]) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        self.kind, self.build = kind, build
        self.entries: OrderedDict[Any, tuple[Mesh, Any]] = OrderedDict()
        self.first: list[Mesh | None] = []  # first-context: the context's mesh at the first call

    def __call__(self, mesh: Mesh) -> tuple[Mesh, Any]:
        if self.kind == "first-context":
            if not self.first:
                context = jax.sharding.get_mesh()
                self.first.append(None if context.empty else context)
            mesh = self.first[0] or mesh
        key = _key(self.kind, mesh)
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        self.entries[key] = (mesh, self.build(mesh))
        keep = {"last-only": 1, "two-meshes": 2}.get(self.kind)
        while keep is not None and len(self.entries) > keep:
            self.entries.popitem(last=False)
        return self.entries[key]
