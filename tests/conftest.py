"""Test-session set-up and shared fixtures.

One BLAS thread, set before numpy loads: the library's d x d products are small, and on a 2-core
machine threaded BLAS competing with other work made them up to 30 times slower (measured). A
value set by the caller wins.

Matplotlib draws with the Agg backend in the tests (and in the doctests of the book layer, which
import it); the chapters are executed without it, so that their figures show inline.

Plain reference formulas and constants shared by several modules live in ``tests/helpers.py``;
the fixtures below give fresh seeded data to each test.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# Hypothesis (tests/test_properties.py): a derandomized profile with a fixed number of examples
# and no deadline, so CI draws the same examples on every run; HYPOTHESIS_PROFILE picks another.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the property tests skip themselves without hypothesis
    pass
else:
    _hypothesis_settings.register_profile("ci", derandomize=True, max_examples=80, deadline=None, print_blob=True)
    _hypothesis_settings.register_profile("dev", max_examples=200, deadline=None)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tokendynamics import Attention, sample_sphere  # noqa: E402


@pytest.fixture
def rng():
    """A seeded generator, the same stream in every test that asks for it."""
    return np.random.default_rng(20260101)


@pytest.fixture
def I2():
    return np.eye(2)


@pytest.fixture
def random_layer(rng):
    """``random_layer(kind, d=2, scale=0.5, **kw)``: a one-head layer of any kind with Gaussian matrices."""

    def make(kind, d=2, scale=0.5, **kw):
        V = rng.standard_normal((d, d))
        if kind == "l2":
            return Attention(
                "l2", Q=scale * rng.standard_normal((d, d)), K=scale * rng.standard_normal((d, d)), V=V, **kw
            )
        return Attention(kind, A=scale * rng.standard_normal((d, d)), V=V, **kw)

    return make


@pytest.fixture
def circle_angles(rng):
    """``circle_angles(n)``: n angles uniform on [0, 2 pi) (tokens ``circle_tokens(theta)``)."""
    return lambda n: rng.uniform(0, 2 * np.pi, n)


@pytest.fixture
def unit_tokens(rng):
    """``unit_tokens(n, d)``: n tokens uniform on the sphere S^{d-1} (on the circle for d = 2)."""
    return lambda n, d=2: sample_sphere(n, d, rng)


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
