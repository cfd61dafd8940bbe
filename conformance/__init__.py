"""Conformance kit for ``pjit_double``: jit with input and output sharding.

Importing this package is cheap and never starts JAX's backend, so the pytest
plug-in can make the forced host devices first.

The public face, the modules a user imports or runs (each keeps its import path):

* ``strategies``       -- Hypothesis strategies for any sharded code: meshes, partition specs,
                          shardings, sharded arrays and values of any shape; and the 1-D cases the
                          kit draws for ``pjit_double``
* ``assertions``       -- assertions for any sharded code (values, layout, jit, compiles, the
                          caller's input), raising ``AssertionFailed`` with what was expected
* ``contracts``        -- ``Contract`` and ``Argument``: declare your own sharded function's
                          contract and run the kit's every check on it (``--contract MODULE:ATTR``)
* ``devices``          -- ``ensure_host_devices(N)``: forced CPU devices outside pytest
* ``plugin``           -- the pytest plug-in (``--impl``, ``--host-devices``, the ``host_devices``
                          fixture), loaded through the ``pytest11`` entry point
* ``launch``           -- ``python -m conformance.launch``: the suite as N local processes of one
                          multi-process JAX job
* ``test_conformance`` -- the suite that ``pytest --pyargs conformance`` runs: one test per check
* ``SPEC.md`` (the contract, check by check) and ``report-schema.json`` (the JSON report)

Everything else lives in ``conformance._src`` and may change without notice.  Its rooms, in the
order the data flows from ``--impl`` to a verdict:

* ``_src.session``   -- the plug-in's rooms: options, which runs it joins, set-up, supervision's
                        hooks, verdicts to the report and the exit status
* ``_src.calling``   -- loading ``--impl``, making devices, calling the implementation (timeouts,
                        compile counting), supervising the worker process, multi-process JAX
* ``_src.contract``  -- the contract: its terms (target layout, dtype domain), the value oracle,
                        the check catalogue, the checks, each check's input domain, JAX's known bugs
* ``_src.inputs``    -- the inputs: a case and its token, the coverage cells, the covering
                        schedule, histories of calls (Hypothesis's state machine)
* ``_src.declared``  -- declared contracts (``conformance.contracts``): the contract and its
                        validation, the inputs it gives, its engine and its generic checks
* ``_src.running``   -- running one check: the Kit, gates, the shared pass, Hypothesis, the pool
* ``_src.library``   -- the bodies of the public strategies and assertions, and the jit finder
* ``_src.reporting`` -- the verdict record and the report
* ``_src.internals`` -- the one door to JAX's, pytest's and Hypothesis's private internals; it
                        imports nothing of the kit.  ``_src.selftest`` proves each path it opens.
"""

__version__ = "0.1.0"
