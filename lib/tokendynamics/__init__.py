"""tokendynamics: the library behind the companion book on token dynamics in deep transformers.

Attention kinds (:class:`AttentionKind`: a weight rule and optional capabilities), one attention
layer (:class:`Attention`), one velocity field (:func:`velocity`), generic
integrators (:func:`simulate`); reductions, transport distances and plots are views of them.
"""

from .attention import Attention, attention_matrix, velocity
from .errors import BlowUpError, CapabilityError, ConvergenceError, NonFiniteError, TokenDynamicsError
from .kinds import KINDS, AttentionKind
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
    "AttentionKind",
    "Attention",
    "attention_matrix",
    "velocity",
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
    "CapabilityError",
    "ConvergenceError",
    "NonFiniteError",
    "TokenDynamicsError",
]
