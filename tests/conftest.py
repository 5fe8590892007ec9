"""Test-session set-up.

One BLAS thread, set before numpy loads: the library's d x d products are small, and on a 2-core
machine threaded BLAS competing with other work made them up to 30 times slower (measured). A
value set by the caller wins.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")


def pytest_collection_modifyitems(config, items):
    """Browser tests (marker ``browser``: JupyterLab in Chromium, minutes) run only when asked for by
    name (``-m browser``, as ``make test`` does); plain ``pytest`` and ``pytest -m "not book"``
    leave them out."""
    if "browser" in (config.getoption("markexpr", "") or ""):
        return
    keep = [item for item in items if item.get_closest_marker("browser") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("browser")])
        items[:] = keep
