"""The observation stream has exactly the simulator's shape; anomalies use neutral dynamics."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pytest

from lab.people.watch_calendar import START, ZONE, calendar_records, make_db, watch_records
from mapping.observations import (
    NO_ACTION,
    SlotState,
    observations_from_states,
    to_jsonable,
)
from rhythm.derive import observation_records, observation_stream, rebuild
from simulator import spec
from simulator.dynamics import neutral_delta, reward
from simulator.env import RhythmEnv, observation_space

WEEK = (START + timedelta(days=35), START + timedelta(days=41))  # Monday .. Sunday


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    db = make_db(tmp_path_factory.mktemp("o") / "o.duckdb", [*watch_records(), *calendar_records()])
    rebuild(db, tz=ZONE, today=date(2024, 3, 1))
    yield db
    db.close()


def test_keys_and_shapes_match_the_env(db):
    env = RhythmEnv()
    sim_obs, _ = env.reset(seed=0)
    stream = observation_stream(db, *WEEK, tz=ZONE)
    assert len(stream) == 28
    space = observation_space()
    for obs in stream:
        assert set(obs) == set(sim_obs)
        for k, v in obs.items():
            assert np.shape(v) == np.shape(sim_obs[k]), k
            assert np.asarray(v).dtype.kind == np.asarray(sim_obs[k]).dtype.kind, k
        assert space.contains(obs), obs
    assert [o["t"] for o in stream] == list(range(28))  # a Monday-to-Sunday week is one episode
    assert stream[0]["day"] == 0 and stream[-1]["slot"] == 3 and stream[-1]["remaining_steps"] == 1


def test_each_observation_shows_the_slot_before_it(db):
    recs = observation_records(db, *WEEK, tz=ZONE)
    _, rows = db.query(
        "SELECT local_day, slot, vitality, cognition, progress, serenity, connection FROM meters "
        "WHERE local_day = ? AND slot = 'morning'", [WEEK[0] + timedelta(days=2)])
    morning_wed = np.array(rows[0][2:], dtype=float)
    obs, info = recs[9]  # Wednesday afternoon: the morning just finished
    assert info["local_day"] == "2024-02-07" and info["slot_name"] == "afternoon"
    assert info["previous"]["slot_name"] == "morning"
    filled = np.where(np.isnan(morning_wed), obs["meters"], morning_wed)
    assert np.allclose(obs["meters"], filled)
    _, act = db.query("SELECT action FROM slot_actions WHERE local_day = '2024-02-07' AND slot = 'morning'")
    assert obs["last_action"] == spec.ACTIONS.index(act[0][0])


def test_anomalies_are_deltas_minus_the_neutral_profile(db):
    recs = observation_records(db, *WEEK, tz=ZONE)
    checked = 0
    for i in range(2, len(recs)):
        obs, _ = recs[i]
        prev_obs, _ = recs[i - 1]
        a = obs["last_action"]
        before = prev_obs["meters"]
        assert np.allclose(obs["deltas"], obs["meters"] - before)
        if a == NO_ACTION:
            assert not obs["anomalies"].any()
            continue
        prev_slot = (obs["slot"] - 1) % 4
        expect = obs["deltas"] - neutral_delta(before, prev_slot, a, None)
        assert np.allclose(obs["anomalies"], expect)
        w = np.full(5, 0.2)
        assert obs["last_reward"][0] == pytest.approx(reward(w, obs["deltas"], obs["meters"]))
        checked += 1
    assert checked >= 10


def test_history_is_the_last_seven_steps_oldest_first(db):
    stream = observation_stream(db, *WEEK, tz=ZONE)
    for i in range(8, len(stream)):
        obs = stream[i]
        expect = [stream[j]["last_action"] for j in range(i - 6, i + 1)]
        assert obs["history_actions"].tolist() == expect
        assert np.allclose(obs["history_deltas"][-1], obs["deltas"])


def test_missing_meters_are_filled_and_flagged():
    d = date(2024, 1, 1)
    states = [
        SlotState(d, 0, (0.6, 0.4, None, 0.5, None), 0.5, "DEEP_WORK", 0.8),
        SlotState(d, 1, (None, None, None, None, None)),
    ]
    recs = observations_from_states(states, d, d)
    obs, info = recs[2]  # evening: shows the empty afternoon
    assert np.allclose(obs["meters"], [0.6, 0.4, 0.5, 0.5, 0.5])  # carried forward, else 0.5
    assert info["previous"]["observed"] == [False] * 5
    assert obs["last_action"] == NO_ACTION and not obs["anomalies"].any()
    first, _ = recs[0]
    assert first["last_action"] == NO_ACTION and first["history_actions"].tolist() == [NO_ACTION] * 7
    assert recs[1][0]["last_action"] == spec.ACTIONS.index("DEEP_WORK")


def test_stream_computes_on_the_fly_when_nothing_is_stored(tmp_path):
    db = make_db(tmp_path / "x.duckdb", watch_records(days=14))
    stream = observation_stream(db, START + timedelta(days=7), START + timedelta(days=13), tz=ZONE)
    assert len(stream) == 28 and observation_space().contains(stream[5])
    _, rows = db.query("SELECT count(*) FROM meters")
    assert rows[0][0] == 0  # read-only: nothing was written
    assert isinstance(to_jsonable(stream[0])["meters"], list)
    db.close()


def test_the_agent_belief_update_accepts_real_observations(db):
    from agent.belief import BeliefState

    belief = BeliefState(noise_sd=0.05)
    belief.update_many(observation_stream(db, *WEEK, tz=ZONE))
    b = np.asarray(belief.belief())
    assert b.shape == (3,) and np.all((b >= 0) & (b <= 1))
