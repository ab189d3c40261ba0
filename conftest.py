"""Repository-wide pytest hooks: the order and lanes of the slow tier, and, after a run, the time
spent in the unit tests and in each notebook (nbval runs a notebook's cells as consecutive items),
as `.ci/run` reports them.

`make test` runs the slow tier in two lanes (pytest-xdist, ``--dist loadfile``), one torch thread
each: on two cores, two single-threaded processes do about 1.2× the matrix work of one process on
two threads, and each fills the other's single-threaded stretches (imports, tokenising, pip,
kernel starts). A shared stage is built once whichever lane asks first (the stages' locks make
concurrent builders wait), so the order below decides how often a lane waits instead of working."""
from collections import defaultdict

import pytest

# Notebooks 00–04 build CoRM's stages one after another (answers, perturbations, labels, critics,
# the risk-aware runs): one unit, in order, on one lane, while the other lane builds what the later
# notebooks need
CORM_CHAIN = "corm-chain"
CORM_NOTEBOOKS = ("notebooks/00_", "notebooks/01_", "notebooks/02_", "notebooks/03_", "notebooks/04_")
# then the other lane's heaviest units first (each builds stages a later notebook reads), the audit
# of the served critic once the chain has built it, and the head-to-head (every method) last but
# for the short tests that fill whichever lane frees first
FIRST = ("tests/test_fva.py", "notebooks/05_", "tests/test_alignrag.py", "notebooks/07_",
         "tests/test_counterrefine.py", "notebooks/06_", "tests/test_packaging.py",
         "tests/test_llm_client.py", "tests/test_reliability.py", "tests/test_audit.py",
         "notebooks/08_")

_SECONDS: dict[str, float] = defaultdict(float)


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


def _rank(path: str) -> int:
    if path.startswith(CORM_NOTEBOOKS):
        return -1
    return next((rank for rank, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST))


def pytest_collection_modifyitems(items):
    """Notebook cells (nbval) belong to the slow tier: they load models. Items run in the lane plan's
    order (a stable sort: a file's own items keep theirs)."""
    for item in items:
        if _file(item.nodeid).endswith(".ipynb"):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: _rank(_file(item.nodeid)))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, which a plain pytest run lacks
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadfile`` each file is a unit of work for whichever lane frees first, in the
    order above (with ``--no-loadscope-reorder``), but notebooks 00–04 are one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LanePlan(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return CORM_CHAIN if nodeid.startswith(CORM_NOTEBOOKS) else super()._split_scope(nodeid)

    return LanePlan(config, log)


def pytest_runtest_logreport(report):
    """Runs where the reports arrive — the one process, or xdist's controller — so the times add up
    over both lanes (lane-seconds, not wall time)."""
    path = _file(report.nodeid)
    _SECONDS["unit tests" if path.startswith("tests/") else path] += report.duration


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("time per part")
    for part, seconds in sorted(_SECONDS.items()):
        terminalreporter.write_line(f"::: {part} took {seconds:.0f} s")
