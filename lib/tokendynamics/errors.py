"""Exceptions of the library: every numerical failure (a blow-up, a non-finite field, a solver that
did not converge) is an error that says what happened and when, never a silent NaN."""

from __future__ import annotations


class TokenDynamicsError(Exception):
    """Base class of the library's own errors."""


class NonFiniteError(TokenDynamicsError, FloatingPointError):
    """A velocity field or right-hand side produced inf or NaN values."""


class CapabilityError(TokenDynamicsError, ValueError):
    """A computation needs a capability the attention kind lacks (a Gaussian closure, a stability constant,
    a rule for token masses...); the message names the kind and the capability."""


class ConvergenceError(TokenDynamicsError, RuntimeError):
    """An inner iterative solver (e.g. Sinkhorn) did not reach its tolerance."""


class BlowUpError(TokenDynamicsError, RuntimeError):
    """An integration left every bounded set: the state became non-finite or exceeded a threshold at
    ``time``; it was last finite and below the threshold at ``last_good_time``; ``reason`` says what was seen."""

    def __init__(self, time: float, last_good_time: float, reason: str):
        self.time = float(time)
        self.last_good_time = float(last_good_time)
        self.reason = reason
        super().__init__(
            f"blow-up detected at t = {self.time:.6g} (last finite state at t = {self.last_good_time:.6g}): {reason}"
        )
