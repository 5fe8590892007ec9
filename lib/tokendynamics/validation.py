"""Input validation for every module of the library (it imports none): each public entry point checks its
arguments here, once, and a wrong one raises a ``ValueError`` (``TypeError`` for a wrong kind of object)
that names it (``name``) and says what was expected."""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

__all__ = [
    "real_array",
    "validate_tokens",
    "validate_square",
    "validate_matrix2",
    "validate_symmetric",
    "validate_spd",
    "validate_covariance",
    "validate_gaussian",
    "validate_weights",
    "validate_measure",
    "validate_positions",
    "validate_angles",
    "validate_finite",
    "validate_positive",
    "validate_count",
    "validate_flag",
    "validate_choice",
    "validate_instance",
    "validate_finite_array",
    "validate_complex",
    "parse_span",
    "time_grid",
    "SOLVERS",
    "PARAMETER_DOCS",
    "validate_unit_rows",
    "validate_rng",
    "require_memory",
    "MEMORY_FRACTION",
    "MAX_ITERATIONS",
]

#: The ``scipy.integrate.solve_ivp`` methods the library's adaptive integrators accept.
SOLVERS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")

_MATRICES2 = "A, V : array (2, 2)\n    Score and value matrices."
_BETA = "beta : float\n    Inverse temperature."

#: Numpydoc entries of parameters checked here, for the whole library's ``@fill_doc(PARAMETER_DOCS)``.
#:
#: :meta hide-value:
PARAMETER_DOCS = {
    "beta": _BETA,
    "matrices2": _MATRICES2,
    "matrices2_beta": _MATRICES2 + "\n" + _BETA,
    "t_span": "t_span : float or (t0, T)\n    Integration interval.",
    "solve_ivp": "method : str\n    ``scipy.integrate.solve_ivp`` method.\nrtol, atol : float\n    Tolerances.",
}


def _all_finite(arr: np.ndarray, name: str) -> np.ndarray:
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (inf or NaN)")
    return arr


def real_array(x, name: str) -> np.ndarray:
    """``x`` as a float64 array; complex, object or string input is refused.

    Parameters
    ----------
    x, name
        The input, and its name in error messages.

    Returns
    -------
    numpy.ndarray
    """
    arr = np.asarray(x)
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real, got a complex array")
    code = arr.dtype.kind  # numpy's type code
    if code in "USV":
        raise ValueError(f"{name} must be an array of real numbers, got {code == 'V' and 'raw bytes' or 'strings'}")
    if code not in "biuf":
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be an array of real numbers, got dtype {arr.dtype}") from None
    return np.asarray(arr, dtype=float)


def validate_finite_array(x, name: str, *, ndim: int | None = None, min_ndim: int = 0) -> np.ndarray:
    """A real float64 array with finite entries, of ``ndim`` dimensions (if given) and at least ``min_ndim``.

    Parameters
    ----------
    x, name, ndim, min_ndim
        The array, its name in error messages, the required and the smallest numbers of dimensions.

    Returns
    -------
    numpy.ndarray
    """
    arr = real_array(x, name)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape {arr.shape}")
    return _all_finite(arr, name)


def validate_tokens(X, d: int | None = None, name: str = "X") -> np.ndarray:
    """Finite float64 tokens (n, d), n >= 1, of dimension ``d`` if given.

    Parameters
    ----------
    X, d, name
        Tokens, the layer's dimension (optional), the name in error messages.

    Returns
    -------
    numpy.ndarray (n, d)
    """
    X = real_array(X, name)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of tokens (n, d), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} must contain at least one token")
    if X.shape[1] == 0:
        raise ValueError(f"{name} must have tokens of dimension d >= 1, got shape {X.shape}")
    if d is not None and X.shape[1] != d:
        raise ValueError(f"{name} has tokens of dimension {X.shape[1]} but the layer has d = {d}")
    return _all_finite(X, name)


def validate_square(M, name: str = "M", d: int | None = None) -> np.ndarray:
    """A finite real float64 square matrix (d x d if ``d`` is given).

    Parameters
    ----------
    M, name, d
        The matrix, its name in error messages, its required size (optional).

    Returns
    -------
    numpy.ndarray (d, d)
    """
    M = real_array(M, name)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {M.shape}")
    if d is not None and M.shape[0] != d:
        raise ValueError(f"{name} must be {d} x {d}, got shape {M.shape}")
    return _all_finite(M, name)


def validate_matrix2(M, name: str = "M") -> np.ndarray:
    """A finite real 2 x 2 matrix or stack (..., 2, 2), as float64.

    Parameters
    ----------
    M, name
        The matrix, and its name in error messages.

    Returns
    -------
    numpy.ndarray (..., 2, 2)
    """
    arr = real_array(M, name)
    if arr.ndim < 2 or arr.shape[-2:] != (2, 2):
        raise ValueError(f"{name} must be a real 2 x 2 matrix (or a stack (..., 2, 2)), got shape {arr.shape}")
    return _all_finite(arr, name)


def validate_symmetric(A, name: str = "A", d: int | None = None, tol: float = 1e-12) -> np.ndarray:
    """A finite real symmetric matrix, returned exactly symmetrised, :math:`(A+A^\\top)/2`.

    Parameters
    ----------
    A, name, d
        As in :func:`validate_square`.
    tol : float
        Largest accepted :math:`\\max_{ij}|A-A^\\top|_{ij}`, relative to :math:`\\max(1,\\max_{ij}|A_{ij}|)`.

    Returns
    -------
    numpy.ndarray (d, d)
    """
    A = validate_square(A, name, d)
    if not np.max(np.abs(A - A.T)) <= tol * max(1.0, float(np.max(np.abs(A)))):
        raise ValueError(f"{name} must be symmetric (|{name} - {name}^T| = {np.max(np.abs(A - A.T)):.3g})")
    return 0.5 * (A + A.T)


def validate_spd(M, name: str = "M", d: int | None = None) -> np.ndarray:
    """A symmetric positive definite matrix (smallest eigenvalue above 1e-12 times the largest).

    Parameters
    ----------
    M, name, d
        As in :func:`validate_square`.

    Returns
    -------
    numpy.ndarray (d, d)
    """
    M = validate_symmetric(M, name, d)
    lam = np.linalg.eigvalsh(M)
    if lam[0] <= 1e-12 * max(1.0, abs(lam[-1])):
        raise ValueError(f"{name} must be symmetric positive definite; its smallest eigenvalue is {lam[0]:.3g}")
    return M


def validate_covariance(S, name: str = "cov", d: int | None = None, tol: float = 1e-10) -> np.ndarray:
    """A finite symmetric positive semi-definite matrix, symmetrised.

    Parameters
    ----------
    S, name, d
        As in :func:`validate_square`.
    tol : float
        Relative tolerance on the asymmetry (as in :func:`validate_symmetric`) and on a negative eigenvalue.

    Returns
    -------
    numpy.ndarray (d, d)
    """
    S = validate_symmetric(S, name, d, tol)
    lam = np.linalg.eigvalsh(S)
    if lam[0] < -tol * max(1.0, float(np.max(np.abs(S)))):
        raise ValueError(f"{name} must be positive semi-definite; its smallest eigenvalue is {lam[0]:.3g}")
    return S


def validate_gaussian(mean, cov, d: int | None = None, *, what: str = "d", name: str = "cov", mean_name: str = "mean"):
    r"""``(mean, cov)`` of a Gaussian :math:`N(\alpha,\Sigma)` as float64: a finite vector (a number is a vector
    of length one) and a covariance of its dimension (singular allowed).

    Parameters
    ----------
    mean, cov, d
        :math:`\alpha`, :math:`\Sigma` and their required dimension (optional).
    what, name, mean_name : str
        Words of the error messages: what requires ``d`` (e.g. "the layer has d"), the names of cov and mean.

    Returns
    -------
    mean : numpy.ndarray (d,)
    cov : numpy.ndarray (d, d)
    """
    mean = np.atleast_1d(real_array(mean, mean_name))
    if mean.ndim != 1:
        raise ValueError(f"{mean_name} must be a vector (d,), got shape {mean.shape}")
    _all_finite(mean, mean_name)
    if d is not None and mean.shape[0] != d:
        raise ValueError(f"{mean_name} has dimension {mean.shape[0]} but {what} = {d}")
    return mean, validate_covariance(np.atleast_2d(real_array(cov, name)), name, mean.shape[0])


def validate_weights(weights, n: int, name: str = "weights") -> np.ndarray | None:
    """A probability vector of length ``n`` (finite, non-negative, sum 1 to 1e-9); None (uniform) stays None.

    Parameters
    ----------
    weights, n, name
        Masses of the tokens (or None), the number of tokens, the name in error messages.

    Returns
    -------
    numpy.ndarray (n,) or None
    """
    if weights is None:
        return None
    w = real_array(weights, name)
    if w.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) like the tokens, got {w.shape}")
    _all_finite(w, name)
    if np.any(w < 0):
        raise ValueError(f"{name} must be non-negative")
    if abs(w.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1 (a probability measure), they sum to {w.sum():.12g}")
    return w


def validate_measure(X, weights, d: int | None = None, name: str = "X"):
    """Tokens and explicit weights of the empirical measure :math:`\\sum_j w_j\\delta_{x_j}` (uniform if None).

    Parameters
    ----------
    X, weights, d, name
        As in :func:`validate_tokens` and :func:`validate_weights`.

    Returns
    -------
    X, w : numpy.ndarray (n, d) and (n,)
    """
    X = validate_tokens(X, d, name)
    w = validate_weights(weights, X.shape[0])
    return X, np.full(X.shape[0], 1.0 / X.shape[0]) if w is None else w


def validate_positions(positions, n: int) -> np.ndarray:
    """Finite positions (n,) of tokens for causal attention (None: ``0, 1, ..., n-1``).

    Parameters
    ----------
    positions, n
        The positions (or None), and the number of tokens.

    Returns
    -------
    numpy.ndarray (n,)
    """
    if positions is None:
        return np.arange(n, dtype=float)
    s = real_array(positions, "positions")
    if s.shape != (n,):
        raise ValueError(f"positions must have shape ({n},) like the tokens, got {s.shape}")
    return _all_finite(s, "positions")


def validate_angles(theta, name: str = "theta") -> np.ndarray:
    """Finite float64 angles (..., n), n >= 1.

    Parameters
    ----------
    theta, name
        The angles, and their name in error messages.

    Returns
    -------
    numpy.ndarray
    """
    th = real_array(theta, name)
    if th.ndim == 0 or th.shape[-1] == 0:
        raise ValueError(f"{name} must be an array of angles (..., n) with n >= 1, got shape {th.shape}")
    return _all_finite(th, name)


def validate_complex(z, name: str) -> np.ndarray:
    """A complex128 array (or number) with finite entries; real input is accepted.

    Parameters
    ----------
    z, name
        The value(s), and the name in error messages.

    Returns
    -------
    numpy.ndarray
    """
    arr = np.asarray(z)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be a complex number or an array of them, got {z!r:.60}")
    return _all_finite(arr.astype(complex), name)


def _scalar(x, name: str) -> float:
    """A real number (a 0-d real array too); booleans, strings and complex numbers are refused."""
    real_0d = isinstance(x, np.ndarray) and x.ndim == 0 and np.isrealobj(x) and np.issubdtype(x.dtype, np.number)
    if isinstance(x, (bool, np.bool_)) or not (isinstance(x, numbers.Real) or real_0d):
        raise ValueError(f"{name} must be a real number, got {x!r} ({type(x).__name__})")
    return float(x)


def validate_finite(x, name: str) -> float:
    """A finite real number (booleans, strings, complex numbers and arrays are refused).

    Parameters
    ----------
    x, name
        The number, and its name in error messages.

    Returns
    -------
    float
    """
    v = _scalar(x, name)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return v


def validate_positive(x, name: str, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    """A finite real number > 0 (>= 0 with ``allow_zero``; ``+inf`` too with ``allow_inf``).

    Parameters
    ----------
    x, name, allow_zero, allow_inf
        The number, its name in error messages, and whether 0 or :math:`+\\infty` are accepted.

    Returns
    -------
    float
    """
    v = _scalar(x, name) if allow_inf else validate_finite(x, name)
    if math.isnan(v):
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    if v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {x!r}")
    return v


def validate_count(n, name: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An integer >= ``minimum`` (and <= ``maximum``, a work budget, if given; a float with an integer value is
    accepted; 2.7 is not).

    Parameters
    ----------
    n, name, minimum, maximum
        The count, its name in error messages, the smallest and the largest accepted values.

    Returns
    -------
    int
    """
    integral = isinstance(n, numbers.Integral) or (
        isinstance(n, numbers.Real) and math.isfinite(float(n)) and float(n).is_integer()
    )
    if isinstance(n, (bool, np.bool_)) or not integral or int(n) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    if maximum is not None and int(n) > maximum:
        raise ValueError(f"{name} = {int(n)} is above its work budget of {maximum}")
    return int(n)


def validate_rng(rng, name: str = "rng") -> np.random.Generator:
    """A ``numpy.random.Generator`` from ``rng``: None, a non-negative int seed, a ``SeedSequence`` or a Generator.

    Parameters
    ----------
    rng, name
        The seed or generator, and its name in error messages.

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(rng, (bool, np.bool_, float, str, bytes)):
        raise TypeError(f"{name} must be None, an int seed, a SeedSequence or a numpy Generator, got {rng!r}")
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be None, an int seed >= 0, a SeedSequence or a numpy Generator, got {rng!r} ({err})"
        ) from None


#: Work budget of an iteration count (Sinkhorn iterations, transformer blocks) given by a caller.
MAX_ITERATIONS = 10_000_000

#: Share of the machine's physical memory one array (with its working copies) may take before it is refused.
MEMORY_FRACTION = 0.5


def _physical_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return math.inf


def require_memory(floats, what: str) -> None:
    """Refuse, before allocating, work that needs more than :data:`MEMORY_FRACTION` of the physical memory.

    Parameters
    ----------
    floats : int or float
        How many float64 values the work holds at once (its arrays and working copies).
    what : str
        What needs them, with its sizes (quoted in the error, e.g. ``"Sinkhorn attention at n = 30000"``).

    Raises
    ------
    MemoryError
        Naming ``what``, the memory it would take and the memory of the machine.
    """
    need, have = 8 * floats, _physical_memory()  # an int stays exact, however large
    if need > MEMORY_FRACTION * have:
        raise MemoryError(
            f"{what} needs about {float(min(need, 1e300)) / 2**30:.3g} GiB, more than {MEMORY_FRACTION:g} of this "
            f"machine's {have / 2**30:.3g} GiB: use fewer tokens or systems"
        )


def validate_flag(x, name: str) -> bool:
    """A boolean (True/False or ``numpy.bool_``); any other value, even a truthy one, is refused.

    Parameters
    ----------
    x, name
        The flag, and its name in error messages.

    Returns
    -------
    bool
    """
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ValueError(f"{name} must be True or False, got {x!r}")


def validate_choice(x, name: str, choices) -> str:
    """One of the strings ``choices`` (anything else, e.g. a wrong case or a non-string, is refused).

    Parameters
    ----------
    x, name, choices
        The value, its name in error messages, the accepted strings.

    Returns
    -------
    str
    """
    choices = tuple(choices)
    if not isinstance(x, str) or x not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {x!r}")
    return x


def validate_instance(x, cls, name: str, what: str | None = None):
    """``x`` itself if it is an instance of ``cls``; else a TypeError naming ``name`` and the expected type.

    Parameters
    ----------
    x, cls, name, what
        The value, the accepted type(s), its name and the expected type in words (default: class names).

    Returns
    -------
    object
    """
    if not isinstance(x, cls):
        expected = what or (cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls))
        raise TypeError(f"{name} must be {expected}, got {type(x).__name__} {x!r:.60}")
    return x


def parse_span(t_span) -> tuple[float, float]:
    """``T`` or ``(t0, T)`` as a pair of finite floats with ``t0 < T``.

    Parameters
    ----------
    t_span : float or (float, float)
        ``T`` or ``(t0, T)``.

    Returns
    -------
    t0, T : float
    """
    if np.isscalar(t_span):
        t0, T = 0.0, validate_finite(t_span, "t_span")
    else:
        try:
            pair = len(t_span) == 2
        except TypeError:
            pair = False
        if not pair:
            raise ValueError(f"t_span must be T or (t0, T), got {t_span!r}")
        t0, T = validate_finite(t_span[0], "t_span[0]"), validate_finite(t_span[1], "t_span[1]")
    if T <= t0:
        raise ValueError(f"t_span must satisfy t0 < T, got ({t0}, {T})")
    return t0, T


def time_grid(t_span, t_eval, default: int = 401):
    """``(t0, T, t_eval)``: the span and increasing output times inside it (``default`` of them if None).

    Parameters
    ----------
    t_span, t_eval, default
        ``T`` or ``(t0, T)``, the output times (or None) and their number when None.

    Returns
    -------
    t0, T, t_eval : float, float, numpy.ndarray
    """
    t0, T = parse_span(t_span)
    t_eval = real_array(np.linspace(t0, T, default) if t_eval is None else t_eval, "t_eval")
    if t_eval.ndim != 1 or t_eval.size == 0 or not np.all(np.isfinite(t_eval)):
        raise ValueError(
            f"t_eval must be a non-empty 1-D array of finite times, got {np.shape(t_eval)} with NaN or inf"
        )
    # written so that a NaN can never pass: every comparison must hold
    if not (t_eval[0] >= t0 and t_eval[-1] <= T and np.all(np.diff(t_eval) > 0)):
        raise ValueError(f"t_eval must be increasing and inside t_span = ({t0:g}, {T:g})")
    return t0, T, t_eval


def validate_unit_rows(X: np.ndarray, name: str = "X0", tol: float = 1e-6) -> np.ndarray:
    """Rows of ``X`` (finite, checked by the caller) on the unit sphere within ``tol``, renormalised.

    Parameters
    ----------
    X, name, tol
        Tokens (..., d), their name in error messages, the largest accepted deviation of a norm from 1.

    Returns
    -------
    array (..., d)
    """
    norms = np.linalg.norm(X, axis=-1)
    if not np.max(np.abs(norms - 1)) <= tol:
        raise ValueError(f"sphere=True needs unit-norm tokens in {name} (use normalize_rows)")
    return X / norms[..., None]
