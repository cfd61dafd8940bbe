"""A layer norm over a mesh's "batch" axis returning a pytree, its declared contracts, and broken
variants.

``layer_norm(x, gamma, beta, *, mesh, eps=1e-5)`` normalises each row of ``x`` (shape ``(n, d)``,
rows split over "batch") and returns ``{"y": ..., "mean": ..., "var": ...}``: ``y`` laid out as
``x``, each row's ``mean`` and ``var`` (shape ``(n,)``) split over "batch" too.  ``gamma`` and
``beta`` (shape ``(d,)``) are replicated.  Rows that "batch" does not divide raise ``ValueError``.
Run the kit's every check on it, in float32 and in bfloat16 (a tolerance of each: ``by_dtype``)::

    python -m pytest --pyargs conformance --impl examples/contracts/layer_norm.py:layer_norm \
        --contract examples/contracts/layer_norm.py:CONTRACT

It computes in float32 whatever the input dtype, each row shifted by its first element before
the mean is taken: a row of nearly equal values then centres exactly (a plain float32 mean of
such a row is off by a unit in the last place of the row's values, and ``(x - mean) / sqrt(var
+ eps)`` multiplies that error by up to ``1 / sqrt(eps)``).

The broken variants (each a function of this file, for ``--impl``) are bugs that plain property
tests rarely look for: ``stats_replicated`` returns the right ``mean`` and ``var`` replicated on
every device (``P()``) instead of split over "batch"; ``stale_mesh`` keeps its mesh, shardings
and jitted function per mesh *shape*, so after a mesh of the same shape over other devices it
returns a result laid out on the old devices; ``one_pass_variance`` takes the variance as
``E[x**2] - E[x]**2``, which cancels for rows whose values are large next to their spread.

The ``cache_*`` variants keep their jitted function per mesh in a cache that goes wrong in
one of the ways caches.py lists, one variant per ``caches.KINDS``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from conformance.contracts import Argument, Contract, by_dtype

sys.path.insert(0, str(Path(__file__).resolve().parent))  # caches.py, beside this file
from caches import MeshCache  # noqa: E402

ROWS = P("batch", None)
OUT = {"y": ROWS, "mean": P("batch"), "var": P("batch")}
REPLICATED = P(None)


def _normalise(x: jax.Array, gamma: jax.Array, beta: jax.Array, eps: float) -> dict[str, jax.Array]:
    wide = x.astype(jnp.float32)
    shift = wide[:, :1]  # the row's first element: centring what is left cancels nothing
    shifted = wide - shift
    shifted_mean = jnp.mean(shifted, axis=-1, keepdims=True)
    centred = shifted - shifted_mean
    var = jnp.mean(jnp.square(centred), axis=-1)
    y = centred * jax.lax.rsqrt(var[:, None] + eps) * gamma.astype(jnp.float32) + beta.astype(jnp.float32)
    mean = (shifted_mean + shift)[:, 0]
    return {"y": y.astype(x.dtype), "mean": mean.astype(x.dtype), "var": var.astype(x.dtype)}


def _one_pass(x: jax.Array, gamma: jax.Array, beta: jax.Array, eps: float) -> dict[str, jax.Array]:
    wide = x.astype(jnp.float32)
    mean = jnp.mean(wide, axis=-1)
    var = jnp.mean(jnp.square(wide), axis=-1) - jnp.square(mean)
    y = (wide - mean[:, None]) * jax.lax.rsqrt(var[:, None] + eps) * gamma.astype(jnp.float32)
    y = y + beta.astype(jnp.float32)
    return {"y": y.astype(x.dtype), "mean": mean.astype(x.dtype), "var": var.astype(x.dtype)}


def _build(mesh: Mesh, eps: float, body: Any = _normalise, out: Any = OUT) -> Any:
    rows, whole = NamedSharding(mesh, ROWS), NamedSharding(mesh, REPLICATED)
    return jax.jit(
        lambda x, gamma, beta: body(x, gamma, beta, eps),
        in_shardings=(rows, whole, whole),
        out_shardings={k: NamedSharding(mesh, spec) for k, spec in out.items()},
    )


def _placed(x: Any, gamma: Any, beta: Any, mesh: Mesh) -> tuple[Any, Any, Any]:
    """The arguments on ``mesh``'s devices as the jitted function takes them; ValueError for rows
    that its "batch" axis does not divide."""
    rows = np.shape(x)[0]
    if rows % mesh.shape["batch"]:
        raise ValueError(f"{rows} rows do not split over the batch axis of {mesh.shape['batch']}")
    whole = NamedSharding(mesh, REPLICATED)
    return (
        jax.device_put(x, NamedSharding(mesh, ROWS)),
        jax.device_put(gamma, whole),
        jax.device_put(beta, whole),
    )


_jitted: dict[Any, Any] = {}


def _jit_for(key: Any, mesh: Mesh, eps: float, **options: Any) -> Any:
    if key not in _jitted:
        _jitted[key] = _build(mesh, eps, **options)
    return _jitted[key]


def layer_norm(x: Any, gamma: Any, beta: Any, *, mesh: Mesh, eps: float = 1e-5) -> dict[str, jax.Array]:
    """Each row of x normalised, then scaled by gamma and shifted by beta, with its mean and var."""
    return _jit_for(("right", mesh, eps), mesh, eps)(*_placed(x, gamma, beta, mesh))


def stats_replicated(x: Any, gamma: Any, beta: Any, *, mesh: Mesh, eps: float = 1e-5) -> dict[str, jax.Array]:
    """Broken: the right mean and var, replicated on every device instead of split over "batch"."""
    out = {"y": ROWS, "mean": P(), "var": P()}
    return _jit_for(("replicated", mesh, eps), mesh, eps, out=out)(*_placed(x, gamma, beta, mesh))


_by_shape: dict[Any, tuple[Mesh, Any]] = {}


def stale_mesh(x: Any, gamma: Any, beta: Any, *, mesh: Mesh, eps: float = 1e-5) -> dict[str, jax.Array]:
    """Broken: mesh and jitted function cached on the mesh's shape, not its devices."""
    key = (tuple(mesh.shape.items()), eps)
    if key not in _by_shape:
        _by_shape[key] = (mesh, _build(mesh, eps))
    old, jitted = _by_shape[key]
    return jitted(*_placed(x, gamma, beta, old))


def one_pass_variance(
    x: Any, gamma: Any, beta: Any, *, mesh: Mesh, eps: float = 1e-5
) -> dict[str, jax.Array]:
    """Broken: var = E[x**2] - E[x]**2, which cancels for rows far from 0 next to their spread."""
    return _jit_for(("one pass", mesh, eps), mesh, eps, body=_one_pass)(*_placed(x, gamma, beta, mesh))


def _cached(kind: str) -> Any:
    cache = MeshCache(kind, lambda mesh: _build(mesh, 1e-5))

    def variant(x: Any, gamma: Any, beta: Any, *, mesh: Mesh, eps: float = 1e-5) -> dict[str, jax.Array]:
        kept, jitted = cache(mesh)
        return jitted(*_placed(x, gamma, beta, kept))

    variant.__doc__ = f"Broken: its jitted function per mesh in a {kind} cache (caches.py)."
    return variant


cache_last_only = _cached("last-only")
cache_two_meshes = _cached("two-meshes")
cache_device_set = _cached("device-set")
cache_flat_ids = _cached("flat-ids")
cache_mesh_shape = _cached("mesh-shape")
cache_axis_names = _cached("axis-names")
cache_first_context = _cached("first-context")


def oracle(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> dict[str, np.ndarray]:
    wide = np.asarray(x, np.float64)
    mean = wide.mean(axis=-1)
    var = np.square(wide - mean[:, None]).mean(axis=-1)
    y = (wide - mean[:, None]) / np.sqrt(var[:, None] + eps) * np.asarray(gamma, np.float64)
    return {"y": y + np.asarray(beta, np.float64), "mean": mean, "var": var}


# Tolerances per dtype of x, measured on values in [-100, 100].  float32: each leaf within a few
# units in the last place of its magnitude, plus an absolute bound for the values that cancel to
# near 0 (y = ... * gamma + beta, a mean of values of both signs).  bfloat16 (8 bits of mantissa):
# computed in float32 and rounded once, each leaf is within one unit in the last place of the
# float64 result rounded to bfloat16, so rtol is about 2**-7.
CONTRACT = Contract(
    name="layer norm",
    arguments=[
        Argument("x", rank=2, dtypes=("float32", "bfloat16"), layouts=(ROWS,)),
        Argument("gamma", shape=lambda x: (x[-1],), layouts=(REPLICATED,)),
        Argument("beta", shape=lambda x: (x[-1],), layouts=(REPLICATED,)),
    ],
    mesh_axes=("batch",),
    mesh="keyword",
    out=OUT,
    oracle=oracle,
    keywords={"eps": 1e-5},
    raises=ValueError,
    rtol=by_dtype(float32={"y": 1e-5, "mean": 1e-5, "var": 1e-5}, bfloat16=1e-2),
    atol=by_dtype(
        float32={"y": 1e-3, "mean": 1e-4, "var": 1e-4},
        bfloat16={"y": 1e-2, "mean": 1e-3, "var": 1e-3},
    ),
)

# The correct function, and each broken variant with the checks that catch it (read by
# tests/mutation_score.py, which runs the kit on each of them).
CORRECT = ("layer_norm",)
KILLED_BY = {
    "stats_replicated": ("fn.layout",),
    "stale_mesh": ("fn.histories",),
    "one_pass_variance": ("fn.values",),
    "cache_last_only": ("fn.histories",),
    "cache_two_meshes": ("fn.histories",),
    "cache_device_set": ("fn.histories",),
    "cache_flat_ids": ("fn.histories",),
    "cache_mesh_shape": ("fn.histories",),
    "cache_axis_names": ("fn.histories",),
    "cache_first_context": ("fn.histories",),
}
