"""Test-session set-up.

One BLAS thread, set before numpy loads: the library's d x d products are small, and on a 2-core
machine threaded BLAS competing with other work made them up to 30 times slower (measured). A
value set by the caller wins.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
