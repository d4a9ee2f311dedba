"""`rhythm train refine`: the student refined on the person's stored answers, installed for
`rhythm recommend`; too few answers or a bad base model: one line, nothing installed."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from rhythm.jobs import feedback as record_feedback
from rhythm.jobs import recommend
from rhythm.recommend import choose_backend, refined_model_path
from storage import open_db
from tests.agent.gguf_fixture import needs_llama_cpp
from tests.rhythm.test_recommend import DAY, _now, settings  # noqa: F401 (fixture)


def _answer_days(settings, days: int) -> int:  # noqa: F811
    """Plan `days` mornings before DAY and answer every block: accept the evening ones,
    ignore the rest. Returns the number of answers."""
    n = 0
    for k in range(days, 0, -1):
        plan = recommend(settings, now=_now(DAY - timedelta(days=k), 6))
        for s in plan.slots:
            record_feedback(settings, s.id, "accept" if s.slot == "evening" else "ignore")
            n += 1
    return n


def _runs(settings, kind: str) -> int:  # noqa: F811
    with open_db(settings.database, read_only=True) as db:
        return db.con.execute("SELECT count(*) FROM runs WHERE kind = ?", [kind]).fetchone()[0]


@pytest.mark.ml
def test_too_few_answers_is_one_line_and_installs_nothing(settings, run_cli):  # noqa: F811
    code, _, err = run_cli("--home", settings.home, "train", "refine")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code != 0 and len(lines) == 1 and "at least 4" in lines[0] and "Traceback" not in err
    assert not refined_model_path(settings).exists() and _runs(settings, "refine") == 0


@pytest.mark.ml
@needs_llama_cpp
@pytest.mark.slow
def test_refine_installs_a_model_recommend_then_uses(settings, run_cli):  # noqa: F811
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    answers = _answer_days(settings, 2)
    assert answers >= 4
    code, out, err = run_cli("--home", settings.home, "train", "refine", "--steps", "2", "--json")
    assert code == 0, err
    rep = json.loads(out)
    path = refined_model_path(settings)
    assert rep["model"] == str(path) and path.is_file() and path.stat().st_mode & 0o777 == 0o600
    assert rep["answers"] == answers and rep["examples"] + rep["skipped"] == answers and rep["examples"] > 0
    assert rep["steps"] == 2 and rep["prompt_format"].startswith("rhythm v")
    assert json.loads(path.with_suffix(".json").read_text())["answers"] == answers
    assert _runs(settings, "refine") == 1
    assert choose_backend(settings) == ("llm", path)
    plan = recommend(settings, now=_now(DAY, 8))
    assert plan.picks.get("model") is not None  # the refined model was asked
    code, out, _ = run_cli("--home", settings.home, "train", "refine", "--reset")
    assert code == 0 and "removed" in out and not path.exists()
    assert choose_backend(settings)[1] != path


@pytest.mark.ml
def test_a_bad_base_model_is_one_line(settings, run_cli, tmp_path):  # noqa: F811
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    pytest.importorskip("llama_cpp")
    _answer_days(settings, 1)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    code, _, err = run_cli("--home", settings.home, "train", "refine", "--base", bad)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code != 0 and len(lines) == 1 and "GGUF" in lines[0]
    code, _, err = run_cli("--home", settings.home, "train", "refine", "--base", tmp_path / "none.gguf")
    assert code != 0 and "not found" in err
    assert not refined_model_path(settings).exists() and _runs(settings, "refine") == 0


@pytest.mark.slow
def test_a_v4_base_gets_examples_with_the_filter_of_each_answered_slot(settings):  # noqa: F811
    """Refining a v4 student: each example's prompt carries the filter's line before every
    slot of that week up to the answered one, as `rhythm recommend` would have shown it."""
    from rhythm.refine import collect

    answers = _answer_days(settings, 2)
    with open_db(settings.database, read_only=True) as db:
        v4 = collect(db, settings, "rhythm v4")
    assert len(v4.examples) > 0 and v4.answers == answers
    for b in v4.examples:
        assert b.prompt.startswith("rhythm v4\nobs noisy\n") and " b=" not in b.prompt
        lines = b.prompt.split("\n")
        steps = [x for x in lines if x.split(":")[0] in ("morning", "afternoon", "evening", "night")]
        assert sum(x.startswith("b ") for x in lines) == len(steps)  # one before each slot


@pytest.mark.slow
def test_an_answer_read_from_the_data_pulls_by_its_confidence(settings):  # noqa: F811
    """Typed answers weigh 1 in refining; an implicit one (no typed answer) its confidence;
    a typed answer on the same block wins and weighs 1."""
    from datetime import UTC, datetime

    from rhythm.refine import collect
    from storage.implicit import replace_judgements

    plans = [recommend(settings, now=_now(DAY - timedelta(days=k), 6)) for k in (2, 1)]
    typed, read = plans[0].slots, plans[1].slots
    for s in typed:
        record_feedback(settings, s.id, "accept")
    judged = [{"recommendation_id": s.id, "response": "ignore", "source": "implicit",
               "evidence": ["no workout near it"], "confidence": 0.6, "moved": None} for s in [*read, typed[0]]]
    with open_db(settings.database) as db, db.transaction():
        replace_judgements(db, [j["recommendation_id"] for j in judged], judged, at=datetime.now(UTC))
    with open_db(settings.database, read_only=True) as db:
        data = collect(db, settings, "rhythm v4")
    weights = sorted(ex.weight for ex in data.examples)
    assert data.answers == len(typed) + len(read)
    assert weights.count(1.0) == len(typed) and weights.count(0.6) == len(read) - (data.skipped or 0)
