"""tokendynamics: the library behind the companion book on token dynamics in deep transformers.

One attention layer (:class:`Attention`), one velocity field (:func:`velocity`), generic
integrators (:func:`simulate`); reductions, transport distances and plots are views of them.
"""

from .attention import KINDS, Attention, attention_matrix, sinkhorn_potentials, velocity
from .errors import BlowUpError, ConvergenceError, NonFiniteError, TokenDynamicsError
from .particles import (
    Trajectory,
    angles,
    circle_tokens,
    normalize_rows,
    particle_field,
    project_tangent,
    sample_gaussian,
    sample_sphere,
    simulate,
)

__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "Attention",
    "attention_matrix",
    "velocity",
    "sinkhorn_potentials",
    "Trajectory",
    "simulate",
    "particle_field",
    "project_tangent",
    "normalize_rows",
    "sample_sphere",
    "sample_gaussian",
    "circle_tokens",
    "angles",
    "BlowUpError",
    "ConvergenceError",
    "NonFiniteError",
    "TokenDynamicsError",
]
