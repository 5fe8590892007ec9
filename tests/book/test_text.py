"""Tests of ``tokendynamics.book.text``: numbers and counts as the book's prose prints them."""

from __future__ import annotations

import pytest

from tokendynamics.book.text import count_phrase, sci


def test_count_phrase_never_says_n_of_the_n_or_zero_of_the_n():
    """The ends of a count read "all n" and "none of the n", so that "k of the n ..., the rest ..." is
    never printed without a rest."""
    assert count_phrase(120, 120, "cells") == "all 120 cells"
    assert count_phrase(0, 10, "clouds") == "none of the 10 clouds"
    assert count_phrase(7, 10, "clouds") == "7 of the 10 clouds"


@pytest.mark.parametrize("count, total", [(-1, 10), (11, 10)])
def test_count_phrase_refuses_a_count_outside_zero_to_total(count, total):
    with pytest.raises(ValueError, match="count"):
        count_phrase(count, total, "clouds")


def test_sci_whole_keeps_every_digit_of_numbers_from_100_to_10000_only():
    assert sci(543.4, whole=True) == "543" and sci(-1234.0, whole=True) == "−1234"
    assert sci(543.4) == "540"
    assert sci(3.2e-10, whole=True) == sci(3.2e-10) == "3.2 × 10⁻¹⁰"
    assert sci(42.13, whole=True) == sci(42.13) == "42"
