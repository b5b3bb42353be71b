"""Seed, scale and bookkeeping of the fuzz tier (``tests/fuzz``).

``EMBER_FUZZ_SEED`` (an int) seeds every property; ``EMBER_FUZZ_SCALE`` multiplies every
property's example count.  ``make test`` runs the fixed default seed at scale 1;
``make test-fuzz`` picks a random seed, prints it, and runs 20x the examples.  A failure
names the seed in its report; rerun it with ``EMBER_FUZZ_SEED=<seed> EMBER_FUZZ_SCALE=<scale>
python -m pytest tests/fuzz -k <test>`` (hypothesis also prints the shrunk example).
"""
import collections
import functools
import os

from hypothesis import HealthCheck, given, seed, settings

SEED = int(os.environ.get("EMBER_FUZZ_SEED", "22"))
SCALE = float(os.environ.get("EMBER_FUZZ_SCALE", "1"))

# examples tried per area in this process (the fuzz conftest prints them at the end)
COUNTS = collections.Counter()


def fuzz(area, examples, max_scale=None, **strategies):
    """A hypothesis property of ``area``: ``given(**strategies)``, ``examples * SCALE``
    examples (``SCALE`` capped at ``max_scale``: properties that start processes), the tier's
    seed, no example database (runs depend on the seed alone) and no deadline (the first
    example of a kernel compiles it)."""
    n = max(1, round(examples * (SCALE if max_scale is None else min(SCALE, max_scale))))

    def decorate(fn):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            COUNTS[area] += 1
            return fn(*args, **kwargs)

        test = given(**strategies)(counted)
        test = settings(max_examples=n, deadline=None, database=None, print_blob=True,
                        suppress_health_check=list(HealthCheck))(test)
        return seed(SEED)(test)
    return decorate
