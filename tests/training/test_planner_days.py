"""Planner days (training/planner_days.py): a generated person's decisions are the product's
v4 prompts labelled with the day planner's block action, and training/planner_tune.py packs
a week of them into one sequence whose answers sit where each prompt ends."""

from __future__ import annotations

import pytest

from agent.prompting import FORMAT_V4, parse_output
from common.records import ACTIONS, Event
from lab.planner_days import (
    ASK_HOURS,
    HISTORY_RULES,
    RUN_HOURS,
    ask_times,
    generated_person,
    history_rule,
    person_decisions,
    write_examples,
)
from training.planner_tune import week_groups

SLOT_NAMES = ("morning", "afternoon", "evening")


@pytest.mark.slow
def test_a_generated_persons_decisions_are_product_prompts_with_the_planners_answers():
    seed = 3  # a parent of lab.people.shift_people: a Spanish calendar, shifts, family events
    rows = person_decisions(seed, days=2, kind="shift")
    person = generated_person(seed, 2, kind="shift")
    titles = {r.title for r in person.records if isinstance(r, Event) and r.title}
    assert rows, "a parent's two days have open slots the product asks the model about"
    assert {r["day"] for r in rows} <= {d.isoformat() for d in person.days}
    for r in rows:
        assert r["slot"] in SLOT_NAMES
        lo, hi = ASK_HOURS[SLOT_NAMES.index(r["slot"])]
        hour = int(r["at"][:2]) + int(r["at"][3:]) / 60
        assert lo <= hour <= hi
        assert r["prompt"].startswith(FORMAT_V4 + "\n")
        assert r["prompt"].endswith(f"\n{r['slot']}:")  # the decision the model writes next
        assert not any(t in r["prompt"] for t in titles)  # classes of slots only, never a title
        parsed = parse_output(r["answer"])
        assert parsed.valid
        assert parsed.action == r["action"]
        assert r["action"] in ACTIONS
        # the planner's objective line: the actions the slot can hold, best first (+.00), the
        # others below it; the planner's pick is rated best
        line = r["objective"]
        assert line.startswith(" o ") and line.endswith(" |")
        words = line[3:-2].split()
        names, numbers = words[0::2], [float(x) for x in words[1::2]]
        assert len(set(names)) == len(names) and set(names) <= set(ACTIONS)
        assert numbers == sorted(numbers, reverse=True) and numbers[0] == 0.0
        assert r["action"] in [n for n, v in zip(names, numbers, strict=True) if v == 0.0]
    # the same seed gives the same decisions (the file is the same for any number of workers)
    assert [(r["day"], r["at"], r["action"]) for r in person_decisions(seed, days=2, kind="shift")] == [
        (r["day"], r["at"], r["action"]) for r in rows]


@pytest.mark.slow
def test_with_history_later_decisions_see_stored_plans_and_the_persons_answers():
    seed = 3  # a parent; answers by late_starter (history_rule)
    rule, base = history_rule(seed)
    assert rule is not None and 0.7 <= base <= 1.0
    plain = person_decisions(seed, days=2, kind="shift")
    lived = person_decisions(seed, days=2, kind="shift", history=True)
    assert {r["rule"] for r in lived} == {rule} and all("rule" not in r for r in plain)
    first = min(r["day"] for r in lived)
    # no answers before the first day is over; after it, the answers are in the prompt
    assert not any("\nfb " in r["prompt"] for r in plain)
    assert not any("\nfb " in r["prompt"] for r in lived if r["day"] == first)
    later = [r for r in lived if r["day"] > first]
    assert later and all("\nfb " in r["prompt"] for r in later)
    # the same day's first decision is the same with or without history (nothing stored yet)
    assert lived[0]["prompt"] == plain[0]["prompt"] and lived[0]["action"] == plain[0]["action"]


def test_history_rules_are_drawn_per_person_and_cover_every_rule_and_none():
    from lab.answer_rules import RULES

    assert set(HISTORY_RULES) == {None, *RULES}
    drawn = [history_rule(s) for s in range(300)]
    assert {r for r, _ in drawn} == set(HISTORY_RULES)
    assert drawn == [history_rule(s) for s in range(300)]  # by seed: a re-run answers alike


def test_run_share_puts_that_share_of_the_mornings_at_the_daily_runs_hours(tmp_path):
    from datetime import date, timedelta
    from zoneinfo import ZoneInfo

    days = [date(2025, 3, 3) + timedelta(days=k) for k in range(40)]

    def morning_hours(share: float) -> list[float]:
        return [t.hour + t.minute / 60 for _d, slot, t in ask_times(5, days, ZoneInfo("UTC"), share) if slot == 0]

    assert all(RUN_HOURS[0] <= h <= RUN_HOURS[1] for h in morning_hours(1.0))
    assert sum(h > RUN_HOURS[1] for h in morning_hours(0.0)) > 20  # drawn over the whole morning
    with pytest.raises(ValueError, match="run_share"):
        write_examples(tmp_path, 1, 0, 1, workers=1, run_share=1.5)


def _ex(seed: int, day: str, slot: str, prompt: str) -> dict:
    return {"seed": seed, "day": day, "slot": slot, "prompt": prompt, "answer": "SLEEP b=.5,.5,.5", "action": "SLEEP"}


def test_week_groups_keep_a_weeks_prefix_runs_together_and_cut_where_the_prompt_changes():
    a = _ex(1, "2025-03-10", "morning", "rhythm v4\nday 0\nmorning:")
    b = _ex(1, "2025-03-10", "evening", a["prompt"] + " ? m .5\nafternoon: ? m .5\nevening:")
    c = _ex(1, "2025-03-11", "morning", "rhythm v4\nday 0\ncal evening SLEEP\nmorning: ? m .5\nday 1\nmorning:")
    d = _ex(1, "2025-03-17", "morning", "rhythm v4\nday 0\nmorning:")  # the next week
    e = _ex(2, "2025-03-10", "morning", "rhythm v4\nday 0\nmorning:")  # another person
    groups = week_groups([a, b, c, d, e])
    assert [[x["day"] + x["slot"] for x in g] for g in groups] == [
        ["2025-03-10morning", "2025-03-10evening"], ["2025-03-11morning"], ["2025-03-17morning"],
        ["2025-03-10morning"]]
    assert [g[0]["seed"] for g in groups] == [1, 1, 1, 2]


@pytest.mark.ml
def test_a_week_is_one_sequence_with_each_answer_where_its_prompt_ends():
    from training.dataset import train_tokenizer
    from training.planner_tune import encode_week
    from training.tokens import EOS

    p1 = "rhythm v4\nday 0\nb .50 .50 .50\nmorning:"
    p2 = p1 + " ? +.10 m .50 .50 .50 .50 .50 x ? ? ? ? ?\nb .50 .50 .50\nafternoon: ? +.20 m .40 .50 .50 .50 .50 x ? ? ? ? ?\nb .51 .50 .50\nevening:"
    group = [{**_ex(1, "2025-03-10", "morning", p1), "answer": "EXERCISE b=.50,.50,.50"},
             {**_ex(1, "2025-03-10", "evening", p2), "answer": "FAMILY_TIME b=.51,.50,.50"}]
    tok = train_tokenizer([p2, "EXERCISE b=.50,.50,.50 FAMILY_TIME b=.51,.50,.50"] * 4, 400)
    ids, mask, hide = encode_week(tok, group)
    assert ids[0] == tok.token_to_id(EOS)
    # the afternoon was not asked (a commitment, say): two answers for three step lines
    spans = [ids[(hide == k) & (mask > 0)] for k in sorted(set(hide[hide > 0]))]
    assert [tok.decode(s.tolist()).replace(" ", "") for s in spans] == [
        "EXERCISEb=.50,.50,.50", "FAMILY_TIMEb=.51,.50,.50"]
    # without its answers the sequence is the last prompt, token for token: what the product sends
    assert ids[hide == 0][1:].tolist() == tok.encode(p2).ids


@pytest.mark.ml
def test_a_v6_decisions_objective_line_is_read_before_its_answer_and_hidden_like_it():
    import numpy as np

    from training.dataset import train_tokenizer
    from training.planner_tune import encode_week, prompt_format_of, with_objective
    from training.tokens import EOS

    p1 = "rhythm v4\nday 0\nb .50 .50 .50\nmorning:"
    p2 = p1 + " ? +.10 m .50 .50 .50 .50 .50 x ? ? ? ? ?\nb .50 .50 .50\nafternoon:"
    o1, o2 = " o SLEEP -.40 EXERCISE +.00 |", " o DEEP_WORK -1.20 LEARN +.00 |"
    group = [{**_ex(1, "2025-03-10", "morning", p1), "objective": o1, "answer": "EXERCISE b=.50,.50,.50"},
             {**_ex(1, "2025-03-10", "afternoon", p2), "objective": o2, "answer": "LEARN b=.50,.50,.50"}]
    assert prompt_format_of(group) == "rhythm v6" and prompt_format_of([_ex(1, "d", "s", p1)]) == FORMAT_V4
    tok = train_tokenizer([p2 + o1 + o2, "EXERCISE b=.50,.50,.50 LEARN b=.50,.50,.50"] * 4, 400)
    ids, mask, hide = encode_week(tok, group)
    assert ids[0] == tok.token_to_id(EOS)
    for k, (line, answer) in enumerate([(o1, group[0]["answer"]), (o2, group[1]["answer"])], start=1):
        inserted = ids[hide == k]
        assert tok.decode(inserted.tolist()) == line + answer  # the line, then the answer
        assert tok.decode(ids[(hide == k) & (mask > 0)].tolist()) == answer  # only the answer is a target
    assert ids[hide == 0][1:].tolist() == tok.encode(p2).ids  # the rest is the last prompt
    # a share of decisions goes without its line (the student also reads v4 prompts)
    rng = np.random.default_rng(0)
    kept = [isinstance(with_objective(group[0], rng, 0.3), tuple) for _ in range(400)]
    assert 0.6 < sum(kept) / 400 < 0.8
    assert with_objective(group[0], None, 0.3) == (o1, group[0]["answer"])  # validation keeps it


@pytest.mark.slow
def test_the_command_writes_one_line_per_decision_and_a_rerun_adds_none(run_cli, tmp_path):
    import json

    argv = ["train", "planner-days", "--people", "2", "--seed-start", "5", "--days", "1", "--workers", "1",
            "--json", "--out", tmp_path / "pd"]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    summary = json.loads(out)
    lines = (tmp_path / "pd" / "examples.jsonl").read_text().splitlines()
    assert summary["decisions"] == len(lines) == sum(summary["planner_actions"].values()) > 0
    assert {json.loads(x)["seed"] for x in lines} <= {5, 6}
    code, out, err = run_cli(*argv)
    assert code == 0, err
    assert (tmp_path / "pd" / "examples.jsonl").read_text().splitlines() == lines
