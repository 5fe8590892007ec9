"""Input validation shared by every module of the library.

Every public entry point checks its arguments here, once, and a wrong argument raises a
``ValueError`` (or ``TypeError`` for a wrong kind of object) whose message names the argument and
says what was expected. This module imports no other module of the library but
:mod:`tokendynamics.docstrings` (which imports none), so every module can use it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .docstrings import fill_doc

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
    "validate_beta",
    "validate_finite",
    "validate_positive",
    "validate_count",
    "validate_flag",
    "validate_dimension",
    "validate_choice",
    "validate_instance",
    "validate_solver",
    "validate_tolerances",
    "validate_pair",
    "validate_finite_array",
    "validate_complex",
    "parse_span",
    "time_grid",
    "SOLVERS",
    "PARAMETER_DOCS",
    "validate_unit_rows",
]

#: The ``scipy.integrate.solve_ivp`` methods the library's adaptive integrators accept.
SOLVERS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")

_MATRICES2 = "A, V : array (2, 2)\n    Score and value matrices."
_BETA = "beta : float\n    Inverse temperature."

#: Numpydoc entries of parameters that this module checks, written once for the docstrings of
#: the whole library (``@fill_doc(PARAMETER_DOCS)``, see :func:`~tokendynamics.docstrings.fill_doc`).
#:
#: :meta hide-value:
PARAMETER_DOCS = {
    "beta": _BETA,
    "matrices2": _MATRICES2,
    "matrices2_beta": _MATRICES2 + "\n" + _BETA,
    "t_span": "t_span : float or (t0, T)\n    Integration interval.",
    "solve_ivp": "method : str\n    ``scipy.integrate.solve_ivp`` method.\nrtol, atol : float\n    Tolerances.",
}

_PARAM_NAME = "name : str\n    Name in error messages."

#: Numpydoc paragraphs shared by the checks of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    "name": _PARAM_NAME,
    # the parameters name and d of the matrix checks
    "name_size": _PARAM_NAME + "\nd : int, optional\n    Required size.",
    "square_sections": (
        "Parameters\n----------\nM : array_like (d, d)\n    The matrix.\n"
        + _PARAM_NAME
        + "\nd : int, optional\n    Required size.\n\nReturns\n-------\nnumpy.ndarray (d, d)"
    ),
    # the number checked by validate_finite and validate_positive
    "number": "x : float\n    The number.\n" + _PARAM_NAME,
    # the lower bound of validate_count and validate_dimension, and what they return
    "minimum_returns": "minimum : int\n    Smallest accepted value.\n\nReturns\n-------\nint",
    "raises": """
        Raises
        ------
        ValueError
            With a message naming the argument and what was expected.
    """,
}


def _all_finite(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr`` itself if every entry is finite; else a ValueError naming ``name``."""
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (inf or NaN)")
    return arr


@fill_doc(_DOC)
def real_array(x, name: str) -> np.ndarray:
    """``x`` as a float64 array; a complex, object or string input raises a ValueError naming ``name``.

    Parameters
    ----------
    x : array_like
        The input.
    name : str
        Its name in error messages.

    Returns
    -------
    numpy.ndarray
        float64 array.

    %(raises)s
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


@fill_doc(_DOC)
def validate_tokens(X, d: int | None = None, name: str = "X") -> np.ndarray:
    """Return ``X`` as a finite float64 (n, d) array of tokens, n >= 1; ``d``: the dimension required.

    Parameters
    ----------
    X : array_like (n, d)
        Tokens.
    d : int, optional
        Required dimension.
    %(name)s

    Returns
    -------
    numpy.ndarray (n, d)

    %(raises)s
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


@fill_doc(_DOC)
def validate_square(M, name: str = "M", d: int | None = None) -> np.ndarray:
    """Return ``M`` as a finite real float64 square matrix (d x d if ``d`` is given).

    %(square_sections)s

    %(raises)s
    """
    M = real_array(M, name)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {M.shape}")
    if d is not None and M.shape[0] != d:
        raise ValueError(f"{name} must be {d} x {d}, got shape {M.shape}")
    return _all_finite(M, name)


@fill_doc(_DOC)
def validate_matrix2(M, name: str = "M") -> np.ndarray:
    """``M`` as a float64 array of real 2 x 2 matrices, shape (..., 2, 2).

    Parameters
    ----------
    M : array_like (..., 2, 2)
        Matrix or stack.
    %(name)s

    Returns
    -------
    numpy.ndarray (..., 2, 2)

    %(raises)s
    """
    arr = real_array(M, name)
    if arr.ndim < 2 or arr.shape[-2:] != (2, 2):
        raise ValueError(f"{name} must be a real 2 x 2 matrix (or a stack (..., 2, 2)), got shape {arr.shape}")
    return _all_finite(arr, name)


def _is_symmetric(A: np.ndarray, tol: float) -> bool:
    return bool(np.max(np.abs(A - A.T)) <= tol * max(1.0, float(np.max(np.abs(A)))))


@fill_doc(_DOC)
def validate_symmetric(A, name: str = "A", d: int | None = None, tol: float = 1e-12) -> np.ndarray:
    """A finite real symmetric matrix (relative tolerance ``tol``), returned exactly symmetrised.

    Parameters
    ----------
    A : array_like (d, d)
        The matrix, symmetric up to round-off.
    %(name_size)s
    tol : float
        Largest accepted :math:`\\max_{ij}|A-A^\\top|_{ij}`, relative to :math:`\\max(1,\\max_{ij}|A_{ij}|)`.

    Returns
    -------
    numpy.ndarray (d, d)
        :math:`(A+A^\\top)/2`.

    %(raises)s
    """
    A = validate_square(A, name, d)
    if not _is_symmetric(A, tol):
        raise ValueError(f"{name} must be symmetric (|{name} - {name}^T| = {np.max(np.abs(A - A.T)):.3g})")
    return 0.5 * (A + A.T)


@fill_doc(_DOC)
def validate_spd(M, name: str = "M", d: int | None = None) -> np.ndarray:
    """A symmetric positive definite matrix (smallest eigenvalue above 1e-12 times the largest).

    %(square_sections)s

    %(raises)s
    """
    M = validate_symmetric(M, name, d)
    lam = np.linalg.eigvalsh(M)
    if lam[0] <= 1e-12 * max(1.0, abs(lam[-1])):
        raise ValueError(f"{name} must be symmetric positive definite; its smallest eigenvalue is {lam[0]:.3g}")
    return M


@fill_doc(_DOC)
def validate_covariance(S, name: str = "cov", d: int | None = None, tol: float = 1e-10) -> np.ndarray:
    """A finite symmetric positive semi-definite matrix (tolerance ``tol`` relative to its size), symmetrised.

    Parameters
    ----------
    S : array_like (d, d)
        A covariance matrix.
    %(name_size)s
    tol : float
        Relative tolerance, both on the asymmetry (as in :func:`validate_symmetric`) and on a
        negative eigenvalue (relative to the largest entry).

    Returns
    -------
    numpy.ndarray (d, d)
        The symmetrised matrix.

    %(raises)s
    """
    S = validate_symmetric(S, name, d, tol)
    lam = np.linalg.eigvalsh(S)
    if lam[0] < -tol * max(1.0, float(np.max(np.abs(S)))):
        raise ValueError(f"{name} must be positive semi-definite; its smallest eigenvalue is {lam[0]:.3g}")
    return S


@fill_doc(_DOC)
def validate_gaussian(mean, cov, d: int | None = None, *, what: str = "d", name: str = "cov", mean_name: str = "mean"):
    r"""Check the parameters of a Gaussian :math:`N(\alpha,\Sigma)`; return ``(mean, cov)`` as float64 arrays.

    ``mean`` must be a finite vector (a number is read as a vector of length one) and ``cov`` a
    finite symmetric positive semi-definite matrix of the same dimension (singular matrices are
    allowed). ``d``, if given, is the dimension both must have; ``what`` names it in the error
    message (e.g. "the layer has d"), ``name`` the covariance and ``mean_name`` the mean.

    Parameters
    ----------
    mean : array_like (d,)
        :math:`\alpha`.
    cov : array_like (d, d)
        :math:`\Sigma`.
    d : int, optional
        Required dimension.
    what, name, mean_name : str
        Words of the error messages.

    Returns
    -------
    mean : numpy.ndarray (d,)
    cov : numpy.ndarray (d, d)

    %(raises)s
    """
    mean = np.atleast_1d(real_array(mean, mean_name))
    if mean.ndim != 1:
        raise ValueError(f"{mean_name} must be a vector (d,), got shape {mean.shape}")
    _all_finite(mean, mean_name)
    if d is not None and mean.shape[0] != d:
        raise ValueError(f"{mean_name} has dimension {mean.shape[0]} but {what} = {d}")
    cov = validate_covariance(np.atleast_2d(real_array(cov, name)), name, mean.shape[0])
    return mean, cov


@fill_doc(_DOC)
def validate_weights(weights, n: int, name: str = "weights") -> np.ndarray | None:
    """A probability vector of length ``n`` (finite, non-negative, sum 1 to 1e-9); None means uniform.

    Parameters
    ----------
    weights : array_like (n,) or None
        Masses of the tokens (None: uniform).
    n : int
        Number of tokens.
    %(name)s

    Returns
    -------
    numpy.ndarray (n,) or None

    %(raises)s
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


@fill_doc(_DOC)
def validate_measure(X, weights, d: int | None = None, name: str = "X"):
    """Tokens and explicit weights of the empirical measure :math:`\\sum_j w_j\\delta_{x_j}` (uniform if None).

    Parameters
    ----------
    X : array_like (n, d)
        Tokens.
    weights : array_like (n,) or None
        Masses (uniform if None).
    d : int, optional
        Required dimension.
    name : str
        Name of the tokens in error messages.

    Returns
    -------
    X : numpy.ndarray (n, d)
    w : numpy.ndarray (n,)

    %(raises)s
    """
    X = validate_tokens(X, d, name)
    w = validate_weights(weights, X.shape[0])
    if w is None:
        w = np.full(X.shape[0], 1.0 / X.shape[0])
    return X, w


@fill_doc(_DOC)
def validate_positions(positions, n: int) -> np.ndarray:
    """Positions of n tokens for causal attention (default ``0, 1, ..., n-1``), finite, shape (n,).

    Parameters
    ----------
    positions : array_like (n,) or None
        Positions of the tokens in the sequence (None: ``0, 1, ..., n-1``).
    n : int
        Number of tokens.

    Returns
    -------
    numpy.ndarray (n,)

    %(raises)s
    """
    if positions is None:
        return np.arange(n, dtype=float)
    s = real_array(positions, "positions")
    if s.shape != (n,):
        raise ValueError(f"positions must have shape ({n},) like the tokens, got {s.shape}")
    return _all_finite(s, "positions")


@fill_doc(_DOC)
def validate_angles(theta, name: str = "theta") -> np.ndarray:
    """Angles as a finite float64 array with at least one token on the last axis.

    Parameters
    ----------
    theta : array_like (..., n)
        Angles.
    %(name)s

    Returns
    -------
    numpy.ndarray

    %(raises)s
    """
    th = real_array(theta, name)
    if th.ndim == 0 or th.shape[-1] == 0:
        raise ValueError(f"{name} must be an array of angles (..., n) with n >= 1, got shape {th.shape}")
    return _all_finite(th, name)


@fill_doc(_DOC)
def validate_beta(beta, name: str = "beta") -> np.ndarray | float:
    """A finite positive inverse temperature (a number, or an array for stacks of layers).

    Parameters
    ----------
    beta : float or array_like
        Inverse temperature(s).
    %(name)s

    Returns
    -------
    float or numpy.ndarray

    %(raises)s
    """
    if isinstance(beta, (bool, np.bool_)):
        raise ValueError(f"{name} must be a finite positive number, got {beta!r}")
    b = real_array(beta, name)
    if not (np.all(np.isfinite(b)) and np.all(b > 0)):
        raise ValueError(f"{name} must be a finite positive number, got {beta!r}")
    return float(b) if b.ndim == 0 else b


def _scalar(x, name: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.floating, np.integer)):
        if (
            isinstance(x, np.ndarray)
            and x.ndim == 0
            and np.issubdtype(x.dtype, np.number)
            and not np.issubdtype(x.dtype, np.complexfloating)
        ):
            return float(x)
        raise ValueError(f"{name} must be a real number, got {x!r} ({type(x).__name__})")
    return float(x)


@fill_doc(_DOC)
def validate_finite(x, name: str) -> float:
    """A finite real number (booleans, strings, complex numbers and arrays are refused).

    Parameters
    ----------
    %(number)s

    Returns
    -------
    float

    %(raises)s
    """
    v = _scalar(x, name)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return v


@fill_doc(_DOC)
def validate_positive(x, name: str, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    """A finite real number > 0 (or >= 0 with ``allow_zero``; ``+inf`` too with ``allow_inf``).

    Parameters
    ----------
    %(number)s
    allow_zero, allow_inf : bool
        Accept 0, or :math:`+\\infty`.

    Returns
    -------
    float

    %(raises)s
    """
    v = _scalar(x, name) if allow_inf else validate_finite(x, name)
    if math.isnan(v):
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    if v < 0 or (v == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {x!r}")
    return v


@fill_doc(_DOC)
def validate_count(n, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (a float with an integer value is accepted; 2.7 is not).

    Parameters
    ----------
    n : int
        The count.
    %(name)s
    %(minimum_returns)s

    %(raises)s
    """
    if isinstance(n, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    if isinstance(n, (numbers.Integral, np.integer)):
        k = int(n)
    elif isinstance(n, (numbers.Real, np.floating)) and math.isfinite(float(n)) and float(n) == int(float(n)):
        k = int(float(n))
    else:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    if k < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n!r}")
    return k


@fill_doc(_DOC)
def validate_flag(x, name: str) -> bool:
    """A boolean (True/False or ``numpy.bool_``); any other value, even a truthy one, is refused.

    Parameters
    ----------
    x : bool
        The flag.
    %(name)s

    Returns
    -------
    bool

    %(raises)s
    """
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ValueError(f"{name} must be True or False, got {x!r}")


@fill_doc(_DOC)
def validate_dimension(d, name: str = "d", *, minimum: int = 2) -> int:
    """A token dimension: an integer >= ``minimum``.

    Parameters
    ----------
    d : int
        The dimension.
    %(name)s
    %(minimum_returns)s

    %(raises)s
    """
    return validate_count(d, name, minimum=minimum)


@fill_doc(_DOC)
def validate_choice(x, name: str, choices) -> str:
    """One of the strings ``choices`` (anything else, e.g. a wrong case or a non-string, is refused).

    Parameters
    ----------
    x : str
        The value.
    %(name)s
    choices : iterable of str
        Accepted values.

    Returns
    -------
    str

    %(raises)s
    """
    choices = tuple(choices)
    if not isinstance(x, str) or x not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {x!r}")
    return x


@fill_doc(_DOC)
def validate_instance(x, cls, name: str, what: str | None = None):
    """``x`` itself if it is an instance of ``cls``; else a TypeError naming ``name`` and the expected type.

    Parameters
    ----------
    x : object
        The value.
    cls : type or tuple of types
        Accepted types.
    %(name)s
    what : str, optional
        The expected type in words.

    Returns
    -------
    object
        ``x``.

    Raises
    ------
    TypeError
        ``x`` is not an instance of ``cls``.
    """
    if not isinstance(x, cls):
        expected = what or (cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls))
        raise TypeError(f"{name} must be {expected}, got {type(x).__name__} {x!r:.60}")
    return x


@fill_doc(_DOC)
def validate_solver(method, name: str = "solver") -> str:
    """A ``solve_ivp`` method name among :data:`SOLVERS` (the error names the library's argument, not scipy's).

    Parameters
    ----------
    method : str
        One of :data:`SOLVERS`.
    %(name)s

    Returns
    -------
    str
        ``method`` itself.

    %(raises)s
    """
    return validate_choice(method, name, SOLVERS)


@fill_doc(_DOC)
def validate_tolerances(rtol, atol, *, rtol_name: str = "rtol", atol_name: str = "atol") -> tuple[float, float]:
    """Positive finite relative and absolute tolerances of an adaptive solver.

    scipy silently raises an ``rtol`` below ``100 * machine epsilon`` to that value and accepts a
    negative one with a warning; here both must be positive numbers (a tiny ``rtol`` stays scipy's
    business).

    Parameters
    ----------
    rtol, atol : float
        Tolerances.
    rtol_name, atol_name : str
        Names in error messages.

    Returns
    -------
    rtol, atol : float

    %(raises)s
    """
    return validate_positive(rtol, rtol_name), validate_positive(atol, atol_name)


@fill_doc(_DOC)
def validate_pair(x, name: str, what: str = "a pair (first, second)") -> tuple:
    """A pair: a tuple or list of two entries (None is not a pair; the caller handles it).

    Parameters
    ----------
    x : tuple or list
        The pair.
    %(name)s
    what : str
        The expected value in words.

    Returns
    -------
    tuple
        ``(x[0], x[1])``.

    %(raises)s
    """
    if isinstance(x, (str, bytes, dict)) or not hasattr(x, "__len__") or isinstance(x, np.ndarray) and x.ndim == 0:
        raise ValueError(f"{name} must be {what}, got {type(x).__name__}")
    if len(x) != 2:
        raise ValueError(f"{name} must be {what}, got {len(x)} entries")
    return x[0], x[1]


@fill_doc(_DOC)
def validate_finite_array(x, name: str, *, ndim: int | None = None, min_ndim: int = 0) -> np.ndarray:
    """A real float64 array with finite entries (optionally of ``ndim`` dimensions, or at least ``min_ndim``).

    Parameters
    ----------
    x : array_like
        The array.
    %(name)s
    ndim : int, optional
        Required number of dimensions.
    min_ndim : int
        Smallest accepted number of dimensions.

    Returns
    -------
    numpy.ndarray

    %(raises)s
    """
    arr = real_array(x, name)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape {arr.shape}")
    return _all_finite(arr, name)


@fill_doc(_DOC)
def validate_complex(z, name: str) -> np.ndarray:
    """A complex128 array (a complex number, or an array of them) with finite entries; real input is accepted.

    Parameters
    ----------
    z : complex or array_like
        The value(s).
    %(name)s

    Returns
    -------
    numpy.ndarray
        complex128.

    %(raises)s
    """
    arr = np.asarray(z)
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be a complex number or an array of them, got {z!r:.60}")
    arr = arr.astype(complex)
    return _all_finite(arr, name)


@fill_doc(_DOC)
def parse_span(t_span) -> tuple[float, float]:
    """``T`` or ``(t0, T)`` as a pair of finite floats with ``t0 < T``.

    Parameters
    ----------
    t_span : float or (float, float)
        ``T`` or ``(t0, T)``.

    Returns
    -------
    t0, T : float

    %(raises)s
    """
    if np.isscalar(t_span):
        t0, T = 0.0, validate_finite(t_span, "t_span")
    else:
        try:
            n_items = len(t_span)
        except TypeError:
            raise ValueError(f"t_span must be T or (t0, T), got {t_span!r}") from None
        if n_items != 2:
            raise ValueError(f"t_span must be T or (t0, T), got {t_span!r}")
        t0, T = validate_finite(t_span[0], "t_span[0]"), validate_finite(t_span[1], "t_span[1]")
    if T <= t0:
        raise ValueError(f"t_span must satisfy t0 < T, got ({t0}, {T})")
    return t0, T


@fill_doc(_DOC)
def time_grid(t_span, t_eval, default: int = 401):
    """``(t0, T, t_eval)``: the span and increasing output times inside it (``default`` points if None).

    Parameters
    ----------
    t_span : float or (float, float)
        ``T`` or ``(t0, T)``.
    t_eval : array_like or None
        Output times.
    default : int
        Number of output times when ``t_eval`` is None.

    Returns
    -------
    t0, T : float
    t_eval : numpy.ndarray

    %(raises)s
    """
    t0, T = parse_span(t_span)
    if t_eval is None:
        t_eval = np.linspace(t0, T, default)
    t_eval = real_array(t_eval, "t_eval")
    if t_eval.ndim != 1 or t_eval.size == 0 or not np.all(np.isfinite(t_eval)):
        raise ValueError(
            f"t_eval must be a non-empty 1-D array of finite times, got {np.shape(t_eval)} with NaN or inf"
        )
    # written so that a NaN can never pass: every comparison must hold
    if not (t_eval[0] >= t0 and t_eval[-1] <= T and np.all(np.diff(t_eval) > 0)):
        raise ValueError(f"t_eval must be increasing and inside t_span = ({t0:g}, {T:g})")
    return t0, T, t_eval


def validate_unit_rows(X: np.ndarray, name: str = "X0", tol: float = 1e-6) -> np.ndarray:
    """Rows of ``X`` (finite, checked by the caller) that lie on the unit sphere, renormalised to round-off.

    Parameters
    ----------
    X : array (..., d)
        Tokens.
    name : str
        Name in error messages.
    tol : float
        Largest accepted deviation of a norm from 1.

    Returns
    -------
    array (..., d)
        ``X`` with every row divided by its norm.

    Raises
    ------
    ValueError
        A row whose norm is not 1 within ``tol``.
    """
    norms = np.linalg.norm(X, axis=-1)
    if not np.max(np.abs(norms - 1)) <= tol:
        raise ValueError(f"sphere=True needs unit-norm tokens in {name} (use normalize_rows)")
    return X / norms[..., None]
