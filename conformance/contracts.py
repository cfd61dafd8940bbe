"""Declared contracts: the kit's whole judgement for your own sharded function.

Declare what the function promises, and run every check of the kit on it::

    python -m pytest --pyargs conformance --impl mypkg.layers:softmax --contract mypkg.contracts:softmax

A ``Contract`` names the function's array ``arguments`` (each an ``Argument``: its rank or shape
rule, dtypes, and the layouts it may come in), how the mesh reaches the function (``mesh=
"keyword"``: a ``mesh=`` keyword; ``"inputs"``: its inputs' shardings), the ``mesh_axes`` it
needs, the result's layout ``out`` (a ``PartitionSpec`` or a pytree of them), the ``oracle`` (a
NumPy function, or ``ITSELF``: the function's own result on one device), the ``dtype`` rule,
the tolerance (``rtol``/``atol``, as ``conformance.assertions.assert_values_close`` takes them,
a function of the inputs giving them, or one per dtype with
``by_dtype(float32=..., bfloat16=...)``), the error a shape its layouts do not divide
``raises``, and static ``keywords``.  It is checked when built: a field the kit cannot judge by
raises ``ContractError`` naming the field and the value, and under the kit's command line it is
a usage error (exit 4).  docs/contracts.md has a runnable example for each field.

``SEED`` and ``FULL`` are ``pjit_double``'s two contracts declared so: ``--contract seed`` and
``--contract full`` name them (``PJIT_DOUBLE`` is ``FULL``).  A contract of their form -- one
vector argument laid out ``P('data')`` and returned so, the mesh given by keyword or none --
gets every check of the kit (``pytest --list-checks``); any other gets the ``fn.*`` checks.
"""

from conformance._src.declared.contract import ITSELF, Argument, Contract, ContractError, by_dtype
from conformance._src.declared.pjit_double import full, seed

SEED: Contract = seed()  # --contract seed: pjit_double(x), float32, one device
FULL: Contract = full()  # --contract full: plus mesh=, every dtype, every placement
PJIT_DOUBLE: Contract = FULL

__all__ = ["FULL", "ITSELF", "PJIT_DOUBLE", "SEED", "Argument", "Contract", "ContractError", "by_dtype"]
