"""Hostile implementations: each ends, wedges or floods the process that calls it.

The kit must still give a verdict for each (tests/test_kit_supervision.py).
Most wrap the bundled reference and turn hostile only on longer vectors, so the gates pass
and the checks after them meet the hostile call; `huge_result` is wrong on every call.
"""
