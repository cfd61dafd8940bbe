"""``pjit_double``: double a vector with jax.jit, sharded over a mesh's 'data' axis.

Fast by construction: the jitted function for a mesh is built once and kept
(the exercise's own version builds a new one per call, and every call
compiles).  A JAX array committed to the target layout, or an uncommitted
one (from ``jax.numpy``) bound for a one-device mesh, which jit places
itself, costs one dictionary look-up, a look at its class, a divisibility
test, a look at ``committed`` (for a committed array, a comparison of its
sharding with the target) and the jitted call.  Only the other inputs take
the longer path, with the costlier tests: NumPy and other array-likes (a
native-byte-order copy where needed, then a ``jax.device_put`` to the target
layout), tracers (straight in), and arrays in another layout (an equivalent
one goes straight in; any other, an uncommitted array bound for several
devices too, pays for a ``jax.device_put`` first).  So the inputs reach one
executable per mesh, shape and dtype in the target layout (jit compiles one
more for uncommitted arrays on a one-device mesh, as a pre-built jit does).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"

# The jitted function, the target layout, the data axis's size, and whether the mesh
# has one device.
Entry = tuple[Callable[[Any], jax.Array], NamedSharding, int, bool]
_compiled: dict[Mesh | None, Entry] = {}

# The classes of concrete JAX arrays (jaxlib's ArrayImpl), learned from the first one
# the long path sees, so that later calls tell them apart from NumPy and tracers by
# ``type(x)`` alone (an ``isinstance`` against jax.Array or Tracer costs more).
_ARRAY_TYPES: set[type] = set()

# Before JAX 0.9.1, jit raises AssertionError ("Unexpected XLA sharding override") for a
# length-0 array split over more than one device; there the empty result is placed directly.
_JIT_SPLITS_EMPTY = tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:3]) >= (0, 9, 1)


def _double(x: jax.Array) -> jax.Array:
    # Exact in every dtype.  ``2 * x`` is the cheaper kernel on CPU (``x + x`` reads x twice: about
    # 1.7x the time at 2**20); for complex it is IEEE multiplication by 2+0j, whose ``2 * (inf+0j)``
    # is ``inf+nanj``, so complex numbers are added, component by component.  (Chosen when traced.)
    return x + x if jnp.iscomplexobj(x) else 2 * x


def _build(mesh: Mesh | None) -> Entry:
    target_mesh = Mesh(np.array(jax.devices()[:1]), (DATA_AXIS,)) if mesh is None else mesh
    sharding = NamedSharding(target_mesh, PartitionSpec(DATA_AXIS))
    fn = jax.jit(_double, in_shardings=sharding, out_shardings=sharding)
    size = int(target_mesh.shape[DATA_AXIS])
    entry = _compiled[mesh] = (fn, sharding, size, target_mesh.size == 1)
    return entry


def _indivisible(n: int, size: int) -> ValueError:
    return ValueError(
        f"pjit_double: length {n} is not divisible by the size {size} of the mesh's {DATA_AXIS!r} axis"
    )


def pjit_double(x: Any, *, mesh: Mesh | None = None) -> jax.Array:
    """Return ``2 * x`` laid out as ``NamedSharding(mesh, PartitionSpec('data'))``.

    ``mesh=None`` means a one-device mesh over ``jax.devices()[:1]``.  Raises
    ``ValueError`` when the length is not a multiple of the data axis size.
    """
    entry = _compiled.get(mesh)
    fn, sharding, size, one_device = entry if entry is not None else _build(mesh)
    if type(x) in _ARRAY_TYPES:  # a concrete JAX array: neither NumPy nor a tracer
        n = x.shape[0]
        if n % size:
            raise _indivisible(n, size)
        if x.committed:
            # In the target layout (that object, or one equal to it): straight in, unless
            # it is empty and split, which this JAX's jit may not do.  The rest take the
            # long path.
            if ((s := x.sharding) is sharding or s == sharding) and (_JIT_SPLITS_EMPTY or n or size == 1):
                return fn(x)
        elif one_device:
            return fn(x)  # jit places it itself, as a pre-built jit does (_call)
    return _call(x, fn, sharding, size, one_device)


def _call(
    x: Any, fn: Callable[[Any], jax.Array], sharding: NamedSharding, size: int, one_device: bool
) -> jax.Array:
    """Every input, fully tested: NumPy, array-likes, tracers, and JAX arrays in any layout."""
    if isinstance(x, np.ndarray) and not x.dtype.isnative:
        # JAX refuses non-native byte order (jit), or reads the bytes as if native
        # (device_put): a native copy; the caller's array is left as it is.
        x = x.astype(x.dtype.newbyteorder("="))
    n = x.shape[0]
    if n % size:
        raise _indivisible(n, size)
    if isinstance(x, jax.core.Tracer):  # traced (make_jaxpr, an outer jit): jit places it
        return fn(x)
    if n == 0 and size > 1 and not _JIT_SPLITS_EMPTY:  # nothing to double, and this jit cannot
        return jax.device_put(
            np.zeros((0,), np.asarray(x).dtype if not isinstance(x, jax.Array) else x.dtype), sharding
        )
    if not isinstance(x, jax.Array):  # NumPy, or anything array-like: straight to the target layout
        return fn(_placed(np.asarray(x), sharding))
    _ARRAY_TYPES.add(type(x))  # later calls with this class take the cheap tests in pjit_double
    if one_device and not x.committed:
        # An uncommitted array lives on one device (JAX commits every array it splits),
        # and jit moves it to the mesh's one device itself when it lives elsewhere:
        # that move does not meet the crash below, which needs a committed input.
        return fn(x)
    if x.sharding is sharding or x.sharding == sharding or x.sharding.is_equivalent_to(sharding, 1):
        return fn(x)  # equivalent layouts go straight in
    # Any other layout, committed or not, is placed explicitly, never left to jit:
    # jit refuses some committed inputs, and in JAX 0.10.2 it accepts an input split
    # over as many other devices (or the same ones in another order), moves it on
    # the first call and crashes the process on the next (tests/test_reference.py).
    # Between CPU devices through host memory: a device-to-device device_put, and
    # jit's own move of an uncommitted input, compile a transfer per shape, dtype
    # and pair of layouts (for jit's, also a second executable), and both are slower
    # (jit's move of an uncommitted vector to 8 CPU devices: about 2x at 2^20).
    on_cpu = x.is_fully_addressable and all(
        getattr(d, "platform", "") == "cpu" for d in x.sharding.device_set
    )
    return fn(_placed(np.asarray(x), sharding) if on_cpu else jax.device_put(x, sharding))


def _placed(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """``host`` (the same values in every process) in ``sharding``.  Across processes each makes
    its own shards: ``device_put`` would first check that every process passed the same values,
    with ``==``, which NaN fails (a JAX bug, conformance/_src/contract/jax_bugs.py)."""
    if sharding.is_fully_addressable:
        return jax.device_put(host, sharding)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index], dtype=host.dtype)
