"""One place where every benchmark records its numbers: ``_build/bench/results.json``.

Each script calls :func:`record` with ``{name: value}``; values of earlier runs of the other scripts
are kept, so that ``make bench`` leaves one file with every ratio, the machine and the versions, which
two versions of the book can compare (``python benchmarks/_results.py old.json new.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "_build" / "bench" / "results.json"


def record(results: dict, path: Path = RESULTS) -> None:
    """Merge ``results`` (name -> number) into the results file, with the machine and the versions."""
    import numpy as np

    import tokendynamics

    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("results", {}).update({k: float(v) for k, v in results.items()})
    data["machine"] = {
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    versions = data.get("versions", {})
    versions.update({"numpy": np.__version__, "tokendynamics": tokendynamics.__version__})
    try:
        import scipy

        versions["scipy"] = scipy.__version__
    except ImportError:  # pragma: no cover
        pass
    try:
        import numba

        versions["numba"] = numba.__version__
    except ImportError:  # pragma: no cover
        pass
    data["versions"] = versions
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def repeat_args(description: str, argv=None, *, repeat: int) -> argparse.Namespace:
    """The command line of a benchmark whose only option is ``--repeat`` (default ``repeat``)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=repeat)
    return parser.parse_args(argv)


def machine_line(details: str) -> str:
    """The first line a benchmark prints: the processor, numpy's version, then ``details``."""
    import numpy as np

    return f"machine: {platform.processor() or platform.machine()}, numpy {np.__version__}, {details}"


def compare(old: Path, new: Path) -> None:
    """Print the ratio new / old for every result the two files share."""
    a = json.loads(Path(old).read_text()).get("results", {})
    b = json.loads(Path(new).read_text()).get("results", {})
    for key in sorted(set(a) & set(b)):
        ratio = b[key] / a[key] if a[key] else float("nan")
        print(f"{key:60s} {a[key]:12.4g} -> {b[key]:12.4g}   x{ratio:.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python benchmarks/_results.py OLD.json NEW.json")
    compare(Path(sys.argv[1]), Path(sys.argv[2]))
