"""Exceptions raised by the library.

Every numerical failure the book can meet (a blow-up during integration, a non-finite field)
is reported by an exception that says what happened and when, never by a silent NaN.
"""

from __future__ import annotations


class TokenDynamicsError(Exception):
    """Base class of the library's own errors.

    Parameters
    ----------
    message : str
        What happened, and what to change.
    """


class NonFiniteError(TokenDynamicsError, FloatingPointError):
    """A velocity field or right-hand side produced inf or NaN values.

    Parameters
    ----------
    message : str
        What happened, and what to change.
    """


class CapabilityError(TokenDynamicsError, ValueError):
    """A computation needs something the attention kind does not know (a Gaussian closure, a stability
    constant, a rule for token masses...): the message names the kind and the missing capability.

    Parameters
    ----------
    message : str
        What was needed, and which kinds have it.
    """


class ConvergenceError(TokenDynamicsError, RuntimeError):
    """An inner iterative solver (e.g. Sinkhorn) did not reach its tolerance.

    Parameters
    ----------
    message : str
        What happened, and what to change.
    """


class BlowUpError(TokenDynamicsError, RuntimeError):
    """An integration left every bounded set: the state became non-finite or exceeded a threshold.

    Attributes
    ----------
    time : float
        First time at which the state was found non-finite or above the threshold.
    last_good_time : float
        Last time at which the state was still finite and below the threshold.
    reason : str
        Human-readable description of what was detected.
    """

    def __init__(self, time: float, last_good_time: float, reason: str):
        self.time = float(time)
        self.last_good_time = float(last_good_time)
        self.reason = reason
        super().__init__(
            f"blow-up detected at t = {self.time:.6g} (last finite state at t = {self.last_good_time:.6g}): {reason}"
        )
