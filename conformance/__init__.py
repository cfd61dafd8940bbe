"""Conformance kit for ``pjit_double``: jit with input and output sharding.

Importing this package is cheap and never starts JAX's backend, so the pytest
plug-in can make the forced host devices first.  The pieces, in the order the
data flows from ``--impl`` to a verdict:

* ``loader``      -- turns ``--impl MODULE:ATTR`` into a callable
* ``devices``     -- makes the forced CPU devices before the backend starts
* ``strategies``  -- Hypothesis strategies: lengths, values, dtypes, meshes, cases, and for any
                     sharded code partition specs, shardings and sharded arrays of any rank
* ``schedule``    -- the covering schedule: the kit's own input for every cell, every run
* ``contract``    -- the target layout and the dtype domain of each contract
* ``calls``       -- calls the implementation (timeouts, compile counting)
* ``pool``        -- one call per distinct input, shared by every check that judges it
* ``oracle``      -- the value oracle (what "doubled" means bit for bit)
* ``assertions``  -- public assertions for any sharded code (values, layout, jit, compiles,
                     the caller's input), on which the checks below are built
* ``jit_probe``   -- finds the jit equation and its shardings in a jaxpr
* ``checks``      -- the checks, registered in ``registry`` under stable IDs
* ``kit``         -- runs one check under Hypothesis: gates, profiles, replays
* ``report``      -- failure messages, the Markdown table and the JSON report
* ``plugin``      -- the pytest plug-in that wires the above together
"""

__version__ = "0.1.0"
