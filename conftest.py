"""Repository-wide pytest hook: after a run, the wall time of the unit tests and of each
notebook (nbval runs a notebook's cells as consecutive items), as `.ci/run` reports them."""
import time
from collections import defaultdict

import pytest

_SECONDS: dict[str, float] = defaultdict(float)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.perf_counter()
    yield
    path = item.nodeid.split("::")[0]
    _SECONDS["unit tests" if path.startswith("tests/") else path] += time.perf_counter() - start


def pytest_collection_modifyitems(items):
    """Notebook cells (nbval) belong to the slow tier: they load models."""
    for item in items:
        if item.nodeid.split("::")[0].endswith(".ipynb"):
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("wall time per part")
    for part, seconds in _SECONDS.items():
        terminalreporter.write_line(f"::: {part} took {seconds:.0f} s")
