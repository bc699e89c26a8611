"""Hypothesis profiles: ``quick`` by default, ``thorough`` in CI (``HYPOTHESIS_PROFILE``).

A developer's run keeps the example counts each test asks for; CI's ``thorough`` profile runs
``THOROUGH_FACTOR`` times as many, so a rare counterexample has more chances to show up where
time is cheaper than a developer's attention. Tests that name their own count write
``max_examples=scaled(N)`` so the profile reaches them too; tests that name none get the
profile's default.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE_ENV = "HYPOTHESIS_PROFILE"
#: how many times ``thorough`` multiplies a test's own example count
THOROUGH_FACTOR = 3

settings.register_profile("quick", max_examples=100, deadline=None)
settings.register_profile("thorough", max_examples=100 * THOROUGH_FACTOR, deadline=None,
                          print_blob=True)

PROFILE = os.environ.get(PROFILE_ENV, "quick")
if PROFILE not in ("quick", "thorough"):
    raise RuntimeError(f"${PROFILE_ENV}={PROFILE!r}: quick or thorough")
settings.load_profile(PROFILE)


def scaled(n: int) -> int:
    """A test's own example count under the profile in force."""
    return n * THOROUGH_FACTOR if PROFILE == "thorough" else n
