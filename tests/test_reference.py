"""The bundled reference, beyond what the suite asks: it survives a JAX crash it could hit.

In JAX 0.10.2, jit given an input split over as many devices as its
in_shardings but other ones (or the same ones in another order) moves it on
the first call and, on the second call with such an input, executes on the
wrong devices and crashes the process (a segmentation fault).  The reference
places such inputs itself; this runs it in a child process, so that a crash
shows as this test's failure, not as the end of the test run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import jax, numpy as np
jax.config.update("jax_num_cpu_devices", 8)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from reference import pjit_double
d = jax.devices()
mesh = Mesh(np.array([d[0], d[7]]), ("data",))
target = NamedSharding(mesh, P("data"))
for ids in ([7, 0], [1, 0], [2, 3]):
    source = NamedSharding(Mesh(np.array([d[i] for i in ids]), ("p",)), P("p"))
    for call in range(3):
        host = np.arange(8, dtype=np.float32) + call
        out = pjit_double(jax.device_put(host, source), mesh=mesh)
        assert out.sharding.is_equivalent_to(target, 1), (ids, call, out.sharding)
        assert np.array_equal(np.asarray(out), 2 * host), (ids, call)
print("survived")
"""


def test_inputs_split_over_other_devices_are_placed_before_jit_sees_them() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CHILD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "survived" in done.stdout, (done.returncode, done.stderr[-2000:])
