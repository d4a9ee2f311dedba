"""The frozen A, Q, E and progress drift are what `python -m simulator.calibrate` chooses."""

from __future__ import annotations

import pytest

from simulator import calibrate, spec


def test_calibration_reproduces_the_frozen_constants():
    lines: list[str] = []
    a, q, e = (
        calibrate.grid(0.10, 3.00, 0.05),
        calibrate.grid(0.05, 2.00, 0.05),
        calibrate.grid(0.05, 2.00, 0.05),
    )
    start = abs(spec.SPEC_DRIFT_P)
    choice = calibrate.calibrate(
        [round(start - 0.001 * i, 3) for i in range(8)], a, q, e, log=lines.append
    )
    assert choice is not None
    assert (choice.drift, choice.a, choice.q, choice.e) == pytest.approx(
        (spec.DRIFT_P, spec.GRADER_A, spec.GRADER_Q, spec.GRADER_E)
    )
    assert abs(choice.scores["random", "in-dist"] - 0.393) <= calibrate.LAND
    assert abs(choice.scores["heuristic", "in-dist"] - 0.463) <= calibrate.LAND
    assert len(lines) >= 3  # the search is reported


def test_main_prints_the_search_and_the_choice(capsys):
    assert calibrate.main(["--step", "0.25"]) in (0, 1)  # a coarse grid may find nothing
    out = capsys.readouterr().out
    assert "drift" in out and "feasible" in out
