"""Test-session set-up.

One BLAS thread, set before numpy loads: the library's d x d products are small, and on a 2-core
machine threaded BLAS competing with other work made them up to 30 times slower (measured). A
value set by the caller wins.
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
