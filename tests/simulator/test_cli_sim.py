"""`rhythm sim` (the Typer sub-app), driven through CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rhythm.cli.sim import app
from simulator.evaluate import evaluate
from tests.agent.gguf_fixture import needs_llama_cpp

runner = CliRunner()


def test_eval_json_matches_the_library():
    res = runner.invoke(
        app, ["eval", "--policy", "heuristic", "--condition", "ood", "--episodes", "7", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    got = data["results"]["ood"]
    want = evaluate("heuristic", "ood", episodes=7).to_dict()
    assert got["episodes"] == 7
    assert got["final_score"] == want["final_score"]
    assert got["final_score_ci95"] == want["final_score_ci95"]
    for k in (
        "crash_free",
        "progress",
        "connection",
        "adaptation",
        "efficiency",
        "belief_accuracy",
        "belief_mae",
        "crashes_mean",
        "crashes_total",
    ):
        assert got[k] == want[k]
    assert got["published"] == 0.455


def test_eval_table_single_condition():
    res = runner.invoke(app, ["eval", "--policy", "random", "--episodes", "5"])
    assert res.exit_code == 0, res.output
    for text in ("final_score", "95% interval", "adaptation", "belief_mae", "crashes", "0.393"):
        assert text in res.stdout


def test_eval_all_prints_the_three_condition_table_with_published_figures():
    res = runner.invoke(
        app, ["eval", "--policy", "heuristic", "--condition", "all", "--episodes", "2"]
    )
    assert res.exit_code == 0, res.output
    out = res.stdout
    for text in ("in-dist", "OOD", "discrete-3", "0.611", "0.621", "0.574", "0.507", "0.426"):
        assert text in out
    res = runner.invoke(
        app, ["eval", "--policy", "random", "--condition", "all", "--episodes", "2", "--json"]
    )
    data = json.loads(res.stdout)
    assert set(data["results"]) == {"in-dist", "ood", "discrete"}
    assert data["results"]["discrete"]["episodes"] == 6  # 2 per named profile
    assert data["published"]["heuristic"]["in-dist"] == 0.463


def test_seed_offset_changes_the_episodes():
    a = json.loads(
        runner.invoke(app, ["eval", "--policy", "random", "--episodes", "3", "--json"]).stdout
    )
    b = json.loads(
        runner.invoke(
            app, ["eval", "--policy", "random", "--episodes", "3", "--seed-offset", "5", "--json"]
        ).stdout
    )
    assert a["results"]["in-dist"]["final_score"] != b["results"]["in-dist"]["final_score"]


def test_errors_are_usage_errors():
    res = runner.invoke(app, ["eval", "--policy", "nobody"])
    assert res.exit_code == 2 and "unknown policy" in res.output
    res = runner.invoke(app, ["eval", "--policy", "random", "--condition", "mars"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["eval", "--policy", "random", "--episodes", "0"])
    assert res.exit_code == 2


def test_policies_lists_the_registry_and_no_args_shows_help():
    res = runner.invoke(app, ["policies"])
    assert res.exit_code == 0 and "heuristic" in res.stdout and "greedy-true" in res.stdout
    groups, current = {}, None
    for line in res.stdout.splitlines():
        if line.endswith(":"):
            current = groups.setdefault(line[:-1], [])
        else:
            current.append(line.strip())
    assert list(groups)[:5] == ["baselines", "teachers", "day planner", "references", "students"]
    assert {"random", "heuristic"} <= set(groups["baselines"])
    assert groups["teachers"] == ["bayes", "bayes-robust", "bayes-calendar"]
    assert groups["day planner"] == ["day-planner"]
    assert groups["references"] == ["ideal", "structureless"]
    offered = {n for g, names in groups.items() if g != "other" for n in names}
    assert {"bayes-noinfo", "belief-only"}.isdisjoint(offered)  # ablations: benchmarks only
    res = runner.invoke(app, [])
    assert "eval" in res.output


def test_eval_feedback_json_adds_the_feedback_fields():
    res = runner.invoke(
        app,
        ["eval", "--policy", "structureless", "--feedback", "--observe", "noisy", "--episodes", "3", "--json"],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["feedback"] is True and data["observe"] == "noisy"
    got = data["results"]["in-dist"]
    for key in ("acceptance_rate", "acceptance_rate_by_days", "belief_mae_after",
                "answers_to_mae_015", "reference_belief_mae_after"):
        assert key in got
    assert set(got["acceptance_rate_by_days"]) == {"1-2", "6-7"}
    assert set(got["belief_mae_after"]) == {"2", "4", "8", "16", "28"}
    assert got["published"] is None  # the published figures are of the plain protocol
    from simulator.feedback_eval import evaluate_feedback

    want = evaluate_feedback("structureless", "in-dist", True, "noisy", episodes=3).to_dict()
    assert got["final_score"] == want["final_score"]
    assert got["belief_mae_after"] == want["belief_mae_after"]
    res = runner.invoke(app, ["eval", "--policy", "heuristic", "--feedback", "--episodes", "2"])
    assert res.exit_code == 0 and "acceptance" in res.stdout and "days 6-7" in res.stdout


@pytest.mark.ml
def test_eval_feedback_errors_are_usage_errors(tmp_path):
    res = runner.invoke(app, ["eval", "--policy", "random", "--observe", "blurry"])
    assert res.exit_code == 2 and "--observe" in res.output
    res = runner.invoke(app, ["eval", "--policy", f"student:{tmp_path / 'none.gguf'}"])
    assert res.exit_code == 2 and "not found" in res.output
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    res = runner.invoke(app, ["eval", "--policy", f"student:{bad}", "--feedback"])
    assert res.exit_code == 2 and "GGUF" in res.output


def test_eval_in_a_world_matches_the_library():
    res = runner.invoke(
        app, ["eval", "--policy", "heuristic", "--world", "kind+drift", "--episodes", "4", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    want = evaluate("heuristic", "in-dist", episodes=4, world="kind+drift").to_dict()
    assert data["world"] == "kind+drift"
    assert data["results"]["in-dist"] == want
    assert want["final_score"] != evaluate("heuristic", "in-dist", episodes=4).final_score
    table = runner.invoke(
        app, ["eval", "--policy", "heuristic", "--world", "noise", "--episodes", "2"]
    )
    assert table.exit_code == 0 and "in world noise" in table.stdout


def test_eval_all_worlds_prints_one_row_per_world():
    from simulator.worlds import WORLDS

    res = runner.invoke(
        app, ["eval", "--policy", "random", "--world", "all-worlds", "--episodes", "2"]
    )
    assert res.exit_code == 0, res.output
    for w in WORLDS:
        assert f"│ {w} " in res.stdout
    res = runner.invoke(
        app, ["eval", "--policy", "random", "--world", "all-worlds", "--episodes", "2", "--json"]
    )
    data = json.loads(res.stdout)
    assert list(data["worlds"]) == list(WORLDS)
    assert data["worlds"]["all"]["world"] == "all"


def test_eval_rejects_an_unknown_world_in_one_line():
    res = runner.invoke(app, ["eval", "--policy", "random", "--world", "sideways"])
    assert res.exit_code != 0
    assert "unknown world" in res.output
    res = runner.invoke(
        app, ["eval", "--policy", "random", "--world", "all-worlds", "--condition", "all"]
    )
    assert res.exit_code != 0 and "one condition" in res.output


def test_eval_in_calendar_weeks_matches_the_library():
    res = runner.invoke(
        app, ["eval", "--policy", "bayes-calendar", "--calendar", "--episodes", "3", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    got = data["results"]["in-dist"]
    want = evaluate("bayes-calendar", "in-dist", episodes=3, calendar=True).to_dict()
    assert data["calendar"] is True and got["calendar"] is True
    assert got["final_score"] == want["final_score"] and got["overridden_mean"] == 0.0
    res = runner.invoke(app, ["eval", "--policy", "heuristic", "--calendar", "--episodes", "3"])
    assert res.exit_code == 0 and "calendar weeks" in res.stdout and "overridden / week" in res.stdout


@pytest.mark.parametrize(
    "args, hint",
    [
        (["--policy", "bayes", "--calendar", "--feedback"], "--calendar"),
        (["--policy", "bayes", "--calendar", "--observe", "noisy"], "--calendar"),
        (["--policy", "bayes", "--calendar", "--world", "all-worlds"], "--calendar"),
        (["--policy", "bayes", "--calendar", "--read-calendar"], "--read-calendar"),
        (["--policy", "student", "--read-calendar"], "--read-calendar"),
    ],
)
def test_calendar_combinations_that_are_not_measured_are_usage_errors(args, hint):
    res = runner.invoke(app, ["eval", *args, "--episodes", "2"])
    assert res.exit_code == 2 and hint in res.output
    assert "Traceback" not in res.output


@pytest.mark.ml
@needs_llama_cpp
def test_the_student_plays_a_misspecified_world_like_any_policy():
    """`--world` with the student (issue 21 item 5 measures students there): the plain
    protocol in that world, the same seeds as the library's evaluate."""
    res = runner.invoke(app, ["eval", "--policy", "student", "--world", "kind", "--episodes", "2", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    r = got["results"]["in-dist"]
    assert got["world"] == "kind" and r["world"] == "kind" and r["episodes"] == 2
    assert 0.0 < r["final_score"] < 1.0
    nominal = json.loads(runner.invoke(app, ["eval", "--policy", "student", "--episodes", "2", "--json"]).stdout)
    assert nominal["results"]["in-dist"]["final_score"] != r["final_score"]
    res = runner.invoke(app, ["eval", "--policy", "student", "--world", "all-worlds"])
    assert res.exit_code == 2 and "one world at a time" in res.output
    res = runner.invoke(app, ["eval", "--policy", "student", "--world", "kind", "--feedback"])
    assert res.exit_code == 2 and "--feedback" in res.output
