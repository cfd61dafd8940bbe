"""Hostile implementations: each ends, wedges or floods the process that calls it.

The kit must still give a verdict for each (tests/test_kit_supervision.py).
They wrap the bundled reference, so every check before the hostile input passes.
"""
