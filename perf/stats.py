"""The statistics of ``perf compare``: is a row of NEW slower, faster or the same as in BASE?

Each run stores, per row, the median and the quartiles (q1, q3) of its samples.  With

    ratio = median_new / median_base
    noise = (IQR_base / median_base + IQR_new / median_new) / 2
    band  = max(threshold, noise)

a row is ``slower`` when ``ratio > 1 + band``, ``faster`` when ``ratio < 1 / (1 + band)``, and
``same`` otherwise (within the threshold, or within the noise).

``noise`` is the average relative interquartile range of the two runs: for symmetric sample
distributions, the relative change at which the middle halves of the two runs stop
overlapping.  A noisy machine (wide IQRs) therefore widens the band a change must clear: a
20 % difference between runs whose samples each spread over 30 % is not a regression.  The
IQR describes the spread of single samples, not the standard error of the median, on
purpose: on a shared machine the drift between two runs is of the order of the spread within
one, and does not shrink with more samples.  Files of schema 0 have medians only; their
spread counts as 0 (``noise`` is None when neither run has quartiles).
"""
import math
from dataclasses import dataclass

SLOWER, FASTER, SAME = "slower", "faster", "same"

# Absolute changes below these are never a change (bytes: the allocator's noise).
ABS_TOLERANCE = {"B": 1 << 20}


@dataclass(frozen=True)
class Verdict:
    verdict: str          # slower | faster | same
    ratio: float          # NEW median / BASE median (> 1: NEW is slower, or larger)
    noise: float | None   # relative noise band of the two runs; None when neither has quartiles
    reason: str           # one phrase: why this verdict


def relative_iqr(s):
    """IQR / median of a stats dict, or None when the quartiles are not recorded."""
    q1, q3, m = s.get("q1"), s.get("q3"), s.get("median")
    if q1 is None or q3 is None or m is None:
        return None
    if m == 0:
        return 0.0 if q3 == q1 else math.inf
    return (q3 - q1) / m


def ratio_of(new, base):
    if base == 0:
        return 1.0 if new == 0 else math.inf
    return new / base


def judge(base, new, threshold=0.1, unit="s"):
    """The verdict on one row: ``base`` and ``new`` are stats dicts (median, q1, q3)."""
    b, n = base["median"], new["median"]
    ratio = ratio_of(n, b)
    spreads = [relative_iqr(base), relative_iqr(new)]
    noise = None if spreads == [None, None] else sum(x or 0.0 for x in spreads) / 2
    if abs(n - b) <= ABS_TOLERANCE.get(unit, 0.0):
        return Verdict(SAME, ratio, noise, "within the absolute tolerance")
    band = max(threshold, noise or 0.0)
    if ratio > 1 + band:
        return Verdict(SLOWER, ratio, noise, "beyond threshold and noise")
    if ratio < 1 / (1 + band):
        return Verdict(FASTER, ratio, noise, "beyond threshold and noise")
    if band > threshold and (ratio > 1 + threshold or ratio < 1 / (1 + threshold)):
        return Verdict(SAME, ratio, noise, "within noise")
    return Verdict(SAME, ratio, noise, "within threshold")
