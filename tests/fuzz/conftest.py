"""The fuzz tier: report the seed, the scale and the examples tried per area."""
from .settings import COUNTS, SCALE, SEED


def pytest_terminal_summary(terminalreporter):
    if not COUNTS:
        return
    areas = ", ".join(f"{area} {n}" for area, n in sorted(COUNTS.items()))
    terminalreporter.write_line(f"ember fuzz: EMBER_FUZZ_SEED={SEED} EMBER_FUZZ_SCALE={SCALE:g}; "
                                f"examples per area: {areas} (total {sum(COUNTS.values())})")
