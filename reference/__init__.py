"""The bundled reference implementation of ``pjit_double`` (full contract)."""

from reference.double import pjit_double

__all__ = ["pjit_double"]
