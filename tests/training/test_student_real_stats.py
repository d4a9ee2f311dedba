"""The statistics of benchmarks/student_real.py: the Wilson interval, the paired sign test,
the per-action over-choice test and the teacher-majority histogram, on decisions made up
so that every figure can be counted by hand."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("student_real", ROOT / "benchmarks" / "student_real.py")
student_real = importlib.util.module_from_spec(spec)
sys.modules.setdefault("student_real", student_real)  # its dataclasses look their module up
spec.loader.exec_module(student_real)


def test_wilson_and_sign_test_by_hand():
    lo, hi = student_real.wilson(240, 300)
    assert lo == pytest.approx(0.7510, abs=1e-3) and hi == pytest.approx(0.8416, abs=1e-3)
    assert student_real.sign_test(0, 0) == 1.0
    assert student_real.sign_test(5, 5) == 1.0
    assert student_real.sign_test(8, 0) == pytest.approx(2 / 2**8)


def test_overchosen_test_counts_the_swaps_of_each_action():
    teacher = ["DEEP_WORK"] * 10 + ["LEARN"] * 10
    picks = ["LEARN"] * 6 + ["DEEP_WORK"] * 4 + ["LEARN"] * 9 + ["SLEEP"]
    t = student_real.overchosen_tests(picks, teacher)
    assert set(t) == {"LEARN", "SLEEP"}  # DEEP_WORK is under-chosen, not tested
    assert (t["LEARN"]["only_model"], t["LEARN"]["only_teacher"]) == (6, 1)
    assert t["LEARN"]["p"] == pytest.approx(sum(math.comb(7, i) for i in (6, 7)) / 2**7)
    assert t["SLEEP"]["p"] == pytest.approx(0.5)
    assert student_real.overchosen_tests(teacher, teacher) == {}


def test_summary_compares_the_model_with_the_teachers_majority():
    rows = [
        {"teacher": "DEEP_WORK", "teacher_seeds": ["DEEP_WORK", "LEARN", "LEARN"], "m": "LEARN"},
        {"teacher": "DEEP_WORK", "teacher_seeds": ["DEEP_WORK", "DEEP_WORK", "LEARN"], "m": "LEARN"},
        {"teacher": "MEDITATE", "teacher_seeds": ["MEDITATE", "LEARN", "MEDITATE"], "m": "MEDITATE"},
    ]
    s = student_real.summarize(rows, ["m"])
    assert s["histogram"]["teacher majority"] == {"LEARN": 1, "DEEP_WORK": 1, "MEDITATE": 1}
    assert s["majority_agrees_with_teacher"] == pytest.approx(2 / 3)
    assert s["m"]["over_teacher_majority"] == {"LEARN": 1}
    assert s["m"]["over_teacher_seeds"] == {}  # seed 1 chose LEARN twice too
    assert s["m"]["overchosen_tests"]["LEARN"]["only_model"] == 2
    # the teacher's other seeds face the same per-action test as the model
    seeds = s["teacher_seed_overchosen"]
    assert set(seeds) == {"teacher seed 1", "teacher seed 2"}
    assert seeds["teacher seed 1"]["LEARN"]["only_model"] == 2 and "MEDITATE" not in seeds["teacher seed 1"]
    assert seeds["teacher seed 2"] == {"LEARN": {"only_model": 2, "only_teacher": 0, "p": 0.25}}
    text = student_real.markdown({"streams": {}, "real-shaped (all)": s}, ["m"])
    assert "| teacher majority |" in text and "- m: LEARN +1" in text
    assert "- teacher seed 2: LEARN 2/0 (p 0.25)" in text


def test_a_later_run_joins_an_earlier_report_on_the_same_decisions():
    a = {"models": {"old": "a.gguf"}, "streams": {},
         "rows": [{"stream": "s", "day": "d1", "slot": "morning", "teacher": "SLEEP", "old": "SLEEP"},
                  {"stream": "s", "day": "d1", "slot": "evening", "teacher": "LEARN", "old": "MEDITATE"}],
         "sim_rows": [{"stream": "sim-product", "week": 0, "t": 3, "teacher": "LEARN", "old": "LEARN"}]}
    b = {"models": {"new": "b.gguf"}, "streams": {},
         "rows": [{"stream": "s", "day": "d1", "slot": "evening", "teacher": "LEARN", "new": "LEARN"},
                  {"stream": "s", "day": "d1", "slot": "morning", "teacher": "SLEEP", "new": "SLEEP"}],
         "sim_rows": [{"stream": "sim-product", "week": 0, "t": 3, "teacher": "LEARN", "new": "SLEEP"}]}
    joined = student_real.rerender(student_real.join(a, b))
    assert list(joined["models"]) == ["old", "new"]
    s = joined["real-shaped (all)"]
    assert s["old"]["agrees_count"] == 1 and s["new"]["agrees_count"] == 2
    assert s["new"]["vs_first"] == {"model": "old", "wins": 1, "losses": 0, "p": 1.0}
    assert joined["sim-product"]["new"]["agrees_count"] == 0
    assert "new" not in a["rows"][0]  # the first report is left as it was
    b["rows"][0]["teacher"] = "DEEP_WORK"
    with pytest.raises(ValueError, match="teacher differs"):
        student_real.join(a, b)
    b["rows"].pop()
    with pytest.raises(ValueError, match="not the same decisions"):
        student_real.join(a, b)
    with pytest.raises(ValueError, match="no model"):
        student_real.join(a, a)
