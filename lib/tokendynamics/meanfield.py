r"""The mean-field limit in d = 1: the exact Gaussian solution of softmax attention, the oracle of the particles.

Softmax attention with score :math:`a` and value :math:`v` keeps :math:`N(\alpha_0,\sigma_0^2)` Gaussian,
:math:`\sigma_t^2=\sigma_0^2/(1-2va\sigma_0^2t)`, :math:`\alpha_t=\alpha_0e^{vt}(1-2va\sigma_0^2t)^{-1/2}`,
with the affine flow :math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` (paper 1, Castin et al.,
arXiv:2501.18322). The convergence studies: :mod:`tokendynamics.book.studies.meanfield`.
"""

from __future__ import annotations

import numpy as np

from .attention import Attention
from .docstrings import fill_doc
from .gaussian import blowup_time, one_dimensional_solution
from .validation import validate_positive

__all__ = ["blowup_time_1d", "gaussian_1d_solution", "gaussian_1d_flow_map"]

#: Numpydoc paragraphs shared by the docstrings of this module (:func:`~tokendynamics.docstrings.fill_doc`).
_DOC = {
    "a_v": r"""
        a, v : float
            Score and value of the scalar softmax layer :math:`A=[a]`, :math:`V=[v]`, :math:`\beta=1`.
    """,
    "alpha0_sigma0": r"""
        alpha0, sigma0 : float
            Mean and standard deviation :math:`\sigma_0>0` (not the variance) of :math:`N(\alpha_0,\sigma_0^2)`.
    """,
    "ref_gauss1d": "References\n----------\n"
    "Paper 1 (Castin et al., arXiv:2501.18322), the Gaussian solutions of softmax attention; book: "
    "``chapters/01_well_posedness.md``, equation (eq-p1-gauss1d).",
}


def _layer_1d(a: float, v: float) -> Attention:
    return Attention("softmax", A=[[a]], V=[[v]])


@fill_doc(_DOC)
def blowup_time_1d(sigma0: float, a: float, v: float) -> float:
    r"""Blow-up time :math:`T^*=1/(2va\sigma_0^2)` if :math:`va>0`, else ``inf`` (:func:`.gaussian.blowup_time`, d = 1).

    Parameters
    ----------
    sigma0 : float
        Standard deviation :math:`\sigma_0>0` of the initial Gaussian.
    %(a_v)s

    Returns
    -------
    float
        :math:`T^*`, or ``math.inf``.

    %(ref_gauss1d)s
    """
    return blowup_time([[validate_positive(sigma0, "sigma0") ** 2]], _layer_1d(a, v))


@fill_doc(_DOC)
def gaussian_1d_solution(t, alpha0: float, sigma0: float, a: float, v: float):
    r"""Mean :math:`\alpha_t` and deviation :math:`\sigma_t` of the exact 1-D solution (a BlowUpError past :math:`T^*`).

    Parameters
    ----------
    t : float or array_like
        Time(s), all before :math:`T^*` (:func:`blowup_time_1d`).
    %(alpha0_sigma0)s
    %(a_v)s

    Returns
    -------
    (alpha_t, sigma_t) : tuple of numpy.ndarray or of float
        Of the shape of ``t``.

    %(ref_gauss1d)s
    """
    alpha, var = one_dimensional_solution(alpha0, validate_positive(sigma0, "sigma0") ** 2, _layer_1d(a, v), t)
    return alpha, np.sqrt(var)


@fill_doc(_DOC)
def gaussian_1d_flow_map(x, t: float, alpha0: float, sigma0: float, a: float, v: float):
    r"""Characteristic flow :math:`\Phi_t(x)=\alpha_t+\frac{\sigma_t}{\sigma_0}(x-\alpha_0)` of the 1-D solution.

    Parameters
    ----------
    x : array_like
        Initial positions, any shape.
    t : float
        Time, before :math:`T^*`.
    %(alpha0_sigma0)s
    %(a_v)s

    Returns
    -------
    numpy.ndarray
        :math:`\Phi_t(x)`, of the shape of ``x``.

    %(ref_gauss1d)s
    """
    alpha_t, sigma_t = gaussian_1d_solution(t, alpha0, sigma0, a, v)
    return alpha_t + (sigma_t / sigma0) * (np.asarray(x, dtype=float) - alpha0)
