"""``RhythmEnv``: one week with a hidden person, as a Gymnasium environment (spec 1-8).

Observation (a ``spaces.Dict``; after step ``t`` the observation describes step ``t`` and
``t`` is the index of the next step, 28 at the end):

- ``t`` (0..28), ``day`` (= t // 4), ``slot`` (= t % 4), ``remaining_steps`` (= 28 - t)
- ``meters`` (5), ``deltas`` (5, actual deltas of the last step), ``anomalies`` (5, actual
  delta minus the clipped neutral-profile delta without noise)
- ``last_action`` (0..9, 10 = none yet), ``last_reward`` (1,), ``active_event`` (0 = none,
  1..6 = ``spec.EVENTS``: the event that hit during the last step)
- ``history_actions`` (7), ``history_rewards`` (7), ``history_deltas`` (7, 5): the last 7
  steps, oldest first, left-padded with action 10, reward 0 and zero deltas.

Action: an int 0..9, or a dict ``{"action": int, "belief": array(3) or None,
"emit_belief": 0/1}`` (the ``action_space``; ``emit_belief`` defaults to 1 when a belief is
given). The last emitted belief is graded at the end.

``info``: ``seed``, ``t`` (step just taken), ``event`` (its name), ``reward_breakdown``
(spec 5 term by term), ``profile`` (dict), ``belief_truth`` and ``crashes`` so far; after
the last step also ``final_score``, every grader component, ``belief_mae`` and the rewards'
early/late/mean (see :class:`simulator.grader.Grade`).

Feedback mode (``feedback=True``, ../shared/specs/feedback.md; off by default, and then every
episode is bit for bit what it was): the action is a *recommendation*; the person answers it
before the step (:mod:`simulator.feedback`), the step applies it if accepted and the person's
habit (the spec 9 heuristic's action in the same state) if ignored. The observation gains
``last_answer`` (0 none, 1 accepted, 2 ignored) and ``last_recommendation`` (10 = none);
``last_action`` is the action applied; ``info["answers"]`` lists the answers so far.
Observation conditions (``observe``): ``clean`` (default), ``noisy`` (extra noise sd 0.08 on
reported meters and deltas, meters missing as NaN with probability 0.3) and ``answers-only``
(meters, deltas, anomalies and rewards all NaN; the applied action is shown only when the
recommendation was accepted, and events are not shown). The grader and the reward that
``step`` returns (the training signal) use the truth; ``last_reward`` and
``history_rewards`` are computed from what is observed (NaN when a meter is missing).

Seeding: ``reset(seed=s)`` plays episode ``s`` (profile RNG ``default_rng(s ^ 0xA3C5F729)``,
event and noise RNG ``default_rng(s)``, see :mod:`simulator.episode` for the draw order);
``reset()`` without a seed draws the next episode seed from the env's generator.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from simulator import episode, spec, worlds
from simulator import feedback as fb
from simulator.dynamics import compact_params, profile_lists
from simulator.grader import grade
from simulator.policies import heuristic_action
from simulator.profiles import Profile, belief_truth, named_profile, sample_profile

HISTORY = 7
NO_ACTION = spec.N_ACTIONS  # 10
REWARD_BOUND = 20.0
_T = spec.EPISODE_STEPS


def observation_space(feedback: bool = False, observe: str = "clean") -> spaces.Dict:
    """The observation space; ``feedback`` adds ``last_answer`` and ``last_recommendation``,
    an ``observe`` condition other than clean lets the real-valued entries be NaN (missing)."""
    f64 = np.float64
    box = spaces.Box if fb.check_observe(observe) == "clean" else fb.MaybeMissingBox
    d = spaces.Dict(
        {
            "t": spaces.Discrete(_T + 1),
            "day": spaces.Discrete(spec.DAYS + 1),
            "slot": spaces.Discrete(spec.SLOTS_PER_DAY),
            "remaining_steps": spaces.Discrete(_T + 1),
            "meters": box(0.0, 1.0, (spec.N_METERS,), f64),
            "deltas": box(-1.0, 1.0, (spec.N_METERS,), f64),
            "anomalies": box(-2.0, 2.0, (spec.N_METERS,), f64),
            "last_action": spaces.Discrete(spec.N_ACTIONS + 1),
            "last_reward": box(-REWARD_BOUND, REWARD_BOUND, (1,), f64),
            "active_event": spaces.Discrete(spec.N_EVENTS + 1),
            "history_actions": spaces.MultiDiscrete(np.full(HISTORY, spec.N_ACTIONS + 1)),
            "history_rewards": box(-REWARD_BOUND, REWARD_BOUND, (HISTORY,), f64),
            "history_deltas": box(-1.0, 1.0, (HISTORY, spec.N_METERS), f64),
        }
    )
    if feedback:
        d.spaces["last_answer"] = spaces.Discrete(len(fb.ANSWERS))
        d.spaces["last_recommendation"] = spaces.Discrete(spec.N_ACTIONS + 1)
    return d


def action_space() -> spaces.Dict:
    return spaces.Dict(
        {
            "action": spaces.Discrete(spec.N_ACTIONS),
            "belief": spaces.Box(0.0, 1.0, (len(spec.BELIEF_DIMS),), np.float64),
            "emit_belief": spaces.Discrete(2),
        }
    )


def resolve_profile(profile: Profile | str | dict | None) -> Profile | None:
    """A Profile, a named-profile name, a profile dict, or None (sample from the condition)."""
    if profile is None or isinstance(profile, Profile):
        return profile
    if isinstance(profile, str):
        return named_profile(profile)
    if isinstance(profile, dict):
        return Profile.from_dict(profile)
    raise TypeError(f"cannot use {type(profile).__name__} as a profile")


def parse_action(action: Any) -> tuple[int, np.ndarray | None]:
    """``(action_id, belief or None)`` from an int or an action dict; raises ValueError."""
    belief = None
    if isinstance(action, dict):
        b = action.get("belief")
        emit = action.get("emit_belief", 1 if b is not None else 0)
        if b is not None and int(emit):
            belief = np.asarray(b, dtype=np.float64).reshape(-1)
            if belief.shape != (3,) or not np.all(np.isfinite(belief)):
                raise ValueError(f"belief must be 3 finite numbers, got {b!r}")
            belief = np.clip(belief, 0.0, 1.0)
        action = action["action"]
    a = int(action)
    if not 0 <= a < spec.N_ACTIONS:
        raise ValueError(f"action {action!r} out of range 0..{spec.N_ACTIONS - 1}")
    return a, belief


class RhythmEnv(gym.Env):
    """One 28-step week with a hidden person. See the module docstring."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        condition: str = "in-dist",
        profile: Profile | str | dict | None = None,
        render_mode: str | None = None,
        feedback: bool = False,
        observe: str = "clean",
        world: str | None = None,
    ):
        """``world``: a misspecified world (:mod:`simulator.worlds`, e.g. ``"kind+drift"``);
        None or ``"nominal"`` is the spec itself (the code path is then untouched)."""
        if condition not in ("in-dist", "ood"):
            raise ValueError(f"condition must be 'in-dist' or 'ood', got {condition!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"unsupported render_mode {render_mode!r}")
        self.condition = condition
        self.fixed_profile = resolve_profile(profile)
        self.render_mode = render_mode
        self.feedback = bool(feedback)
        self.observe = fb.check_observe(observe)
        self.observation_space = observation_space(self.feedback, self.observe)
        worlds.parse_world(world)  # a bad name fails here, not at reset
        self.world = worlds.NOMINAL if world is None else world
        self.action_space = action_space()
        self._t: int | None = None
        n = _neutral_lists()
        self._n_const, self._n_scaled, self._n_ev, self._n_thr = n

    # -- reset ------------------------------------------------------------------------------
    # options: "profile" (a name, dict or Profile), "condition", "world", and "meters": the
    # week's starting meters instead of the drawn ones (five numbers in [0, 1]; the events
    # and noise are the same draws either way), for weeks that start depleted.
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = options or {}
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
            rng = np.random.default_rng(seed)
        else:
            rng = self.np_random  # the same stream as default_rng(seed)
        seed = int(seed)
        profile = resolve_profile(options.get("profile", self.fixed_profile))
        if profile is None:
            profile = sample_profile(seed, options.get("condition", self.condition))
        self.seed_ = seed
        self.profile = profile
        self.truth = belief_truth(profile)
        self._profile_dict = profile.to_dict()
        self._const, self._scaled, self._ev, self._thr, self._w = profile_lists(profile)

        m0, events, noise = episode.transform(*episode.draw(rng))
        if options.get("meters") is not None:  # a week that starts elsewhere (same draws after)
            m0 = start_meters(options["meters"])
        self._m = m0.tolist()
        self._events = events.tolist()
        self._noise = noise.tolist()
        self._week = None
        world = options.get("world", self.world)
        self._world_now = world
        if worlds.parse_world(world):
            self._week = _week_lists(worlds.world_tables(profile, noise, world, seed))
            self._noise = self._week[4]
            self.truth = worlds.world_truth(self._week[5])
        self._t = 0
        self._rewards: list[float] = []
        self._crashes = 0
        self._belief: np.ndarray | None = None
        self._hist_a = np.full(HISTORY + _T, NO_ACTION, dtype=np.int64)
        self._hist_r = np.zeros(HISTORY + _T)
        self._hist_d = np.zeros((HISTORY + _T, spec.N_METERS))
        zeros = [0.0] * spec.N_METERS
        self._last = (zeros, zeros, NO_ACTION, 0.0, 0)
        if self.feedback or self.observe != "clean":
            self._reset_feedback(seed, profile)
        return self._obs(), self._info_base()

    # -- step -------------------------------------------------------------------------------
    def step(self, action):
        t = self._t
        if t is None or t >= _T:
            raise ResetNeeded("call reset() before step() (the episode is over or not started)")
        if type(action) is int and 0 <= action < spec.N_ACTIONS:
            a = action
        else:
            a, belief = parse_action(action)
            if belief is not None:
                self._belief = belief
        slot = t & 3
        if self.feedback:
            a = self._answer(t, slot, a)
        m0, m1, m2, m3, m4 = self._m
        e = self._events[t]
        nz = self._noise[t]

        fv = spec.FV_BASE + spec.FV_SLOPE * m0 / spec.FV_REF
        fv = spec.FV_MIN if fv < spec.FV_MIN else (spec.FV_MAX if fv > spec.FV_MAX else fv)

        # The person's delta: const + fv * scaled + event + spiral + noise (dynamics docstring).
        if self._week is None:
            cs, sc, ev, thr = self._const[slot][a], self._scaled[slot][a], self._ev[e], self._thr
        else:  # a misspecified world: per-step tables (simulator.worlds)
            cs, sc, ev, thr = (x[t] for x in self._week[:4])
            cs, sc, ev = cs[a], sc[a], ev[e]
        if m3 < thr:
            sv, sc_ = spec.SPIRAL_V, spec.SPIRAL_C
        else:
            sv = sc_ = 0.0
        n0 = m0 + ((((cs[0] + fv * sc[0]) + ev[0]) + sv) + nz[0])
        n1 = m1 + ((((cs[1] + fv * sc[1]) + ev[1]) + sc_) + nz[1])
        n2 = m2 + ((((cs[2] + fv * sc[2]) + ev[2]) + 0.0) + nz[2])
        n3 = m3 + ((((cs[3] + fv * sc[3]) + ev[3]) + 0.0) + nz[3])
        n4 = m4 + ((((cs[4] + fv * sc[4]) + ev[4]) + 0.0) + nz[4])
        n0 = 0.0 if n0 < 0.0 else (1.0 if n0 > 1.0 else n0)
        n1 = 0.0 if n1 < 0.0 else (1.0 if n1 > 1.0 else n1)
        n2 = 0.0 if n2 < 0.0 else (1.0 if n2 > 1.0 else n2)
        n3 = 0.0 if n3 < 0.0 else (1.0 if n3 > 1.0 else n3)
        n4 = 0.0 if n4 < 0.0 else (1.0 if n4 > 1.0 else n4)
        d0, d1, d2, d3, d4 = n0 - m0, n1 - m1, n2 - m2, n3 - m3, n4 - m4

        # The neutral person's clipped delta (no noise), for the anomalies.
        cs, sc, ev = self._n_const[slot][a], self._n_scaled[slot][a], self._n_ev[e]
        if m3 < self._n_thr:
            sv, sc_ = spec.SPIRAL_V, spec.SPIRAL_C
        else:
            sv = sc_ = 0.0
        o0 = m0 + (((cs[0] + fv * sc[0]) + ev[0]) + sv)
        o1 = m1 + (((cs[1] + fv * sc[1]) + ev[1]) + sc_)
        o2 = m2 + (((cs[2] + fv * sc[2]) + ev[2]) + 0.0)
        o3 = m3 + (((cs[3] + fv * sc[3]) + ev[3]) + 0.0)
        o4 = m4 + (((cs[4] + fv * sc[4]) + ev[4]) + 0.0)
        o0 = 0.0 if o0 < 0.0 else (1.0 if o0 > 1.0 else o0)
        o1 = 0.0 if o1 < 0.0 else (1.0 if o1 > 1.0 else o1)
        o2 = 0.0 if o2 < 0.0 else (1.0 if o2 > 1.0 else o2)
        o3 = 0.0 if o3 < 0.0 else (1.0 if o3 > 1.0 else o3)
        o4 = 0.0 if o4 < 0.0 else (1.0 if o4 > 1.0 else o4)
        anomalies = [d0 - (o0 - m0), d1 - (o1 - m1), d2 - (o2 - m2), d3 - (o3 - m3), d4 - (o4 - m4)]

        # Reward (spec 5), in the term order of dynamics.reward.
        w0, w1, w2, w3, w4 = self._w
        thr = spec.CRASH_THRESHOLD
        crashes = (n0 < thr) + (n1 < thr) + (n2 < thr) + (n3 < thr) + (n4 < thr)
        r_delta = spec.REWARD_DELTA_SCALE * (w0 * d0 + w1 * d1 + w2 * d2 + w3 * d3 + w4 * d4)
        r_level = spec.REWARD_LEVEL_SCALE * (
            (w0 * n0 + w1 * n1 + w2 * n2 + w3 * n3 + w4 * n4) - spec.REWARD_LEVEL_BASELINE
        )
        r_prog = spec.REWARD_PROGRESS_BONUS * d2
        r_conn = spec.REWARD_CONNECTION_BONUS * d4
        r_crash = spec.REWARD_CRASH_PENALTY * crashes
        r = (((r_delta + r_level) + r_prog) + r_conn) + r_crash

        deltas = [d0, d1, d2, d3, d4]
        self._m = [n0, n1, n2, n3, n4]
        self._crashes += crashes
        self._rewards.append(r)
        row = HISTORY + t
        self._hist_a[row] = a
        self._hist_r[row] = r
        self._hist_d[row] = deltas
        self._t = t + 1
        self._last = (deltas, anomalies, a, r, e)
        if self.observe != "clean":
            self._observe_step(t, a, e, deltas, anomalies)

        info = self._info_base()
        info["t"] = t
        info["event"] = spec.EVENTS[e]
        info["reward_breakdown"] = {
            "delta": r_delta,
            "level": r_level,
            "progress": r_prog,
            "connection": r_conn,
            "crash": r_crash,
        }
        terminated = self._t == _T
        if terminated:
            info.update(self.grade().to_dict())
        return self._obs(), r, terminated, False, info

    # -- helpers ----------------------------------------------------------------------------
    def grade(self):
        """The grade of the finished episode (spec 8)."""
        if self._t != _T:
            raise ResetNeeded("the episode is not finished")
        return grade(self._rewards, self._m, self._crashes, self._belief, self.truth)

    @property
    def meters(self) -> np.ndarray:
        return np.array(self._m)

    @property
    def belief(self) -> np.ndarray | None:
        return None if self._belief is None else self._belief.copy()

    def _obs(self) -> dict[str, Any]:
        if self.feedback or self.observe != "clean":
            return self._obs_feedback()
        t = self._t
        deltas, anomalies, a, r, e = self._last
        return {
            "t": t,
            "day": t >> 2,
            "slot": t & 3,
            "remaining_steps": _T - t,
            "meters": np.array(self._m),
            "deltas": np.array(deltas),
            "anomalies": np.array(anomalies),
            "last_action": a,
            "last_reward": np.array([r]),
            "active_event": e,
            "history_actions": self._hist_a[t : t + HISTORY].copy(),
            "history_rewards": self._hist_r[t : t + HISTORY].copy(),
            "history_deltas": self._hist_d[t : t + HISTORY].copy(),
        }

    def _info_base(self) -> dict[str, Any]:
        info = {
            "seed": self.seed_,
            "profile": dict(self._profile_dict),
            "belief_truth": self.truth,
            "crashes": self._crashes,
        }
        if self.feedback:
            info["answers"] = [dict(x) for x in self._answers]
        if self._week is not None:
            info["world"] = self._world_now
        return info

    # -- feedback mode and observation conditions (feedback.md) -------------------------------
    def _reset_feedback(self, seed: int, profile: Profile) -> None:
        t1 = HISTORY + _T
        if self.feedback:
            self._answer_u = fb.answer_uniforms(seed).tolist()
            self._compact = compact_params(profile.to_array()[None, :])
        self._answers: list[dict[str, Any]] = []
        self._rec, self._ans = NO_ACTION, fb.ANSWER_NONE
        # What the agent sees (== the truth when clean).
        self._om = np.array(self._m)
        self._olast = (np.zeros(spec.N_METERS), np.zeros(spec.N_METERS), NO_ACTION, 0.0, 0)
        self._ohist_a = np.full(t1, NO_ACTION, dtype=np.int64)
        self._ohist_r = np.zeros(t1)
        self._ohist_d = np.zeros((t1, spec.N_METERS))
        if self.observe == "noisy":
            self._missing, self._meter_noise, self._delta_noise = fb.noise_draws(seed)
            self._om = self._noisy_meters(0, self._om)
        elif self.observe == "answers-only":
            self._om = np.full(spec.N_METERS, np.nan)

    def _answer(self, t: int, slot: int, rec: int) -> int:
        """The person answers recommendation ``rec``; returns the action the step applies."""
        m = np.array(self._m)
        u = fb.utilities_batch(self._compact, m[None, :], slot)
        p = float(fb.accept_probability(u, rec)[0])
        accepted = self._answer_u[t] < p
        applied = rec if accepted else heuristic_action(m, slot)
        self._rec = rec
        self._ans = fb.ANSWER_ACCEPTED if accepted else fb.ANSWER_IGNORED
        self._answers.append(
            {
                "t": t,
                "slot": slot,
                "recommendation": rec,
                "accepted": bool(accepted),
                "applied": int(applied),
                "p_accept": p,
            }
        )
        return int(applied)

    def _noisy_meters(self, row: int, meters: np.ndarray) -> np.ndarray:
        m = np.clip(meters + self._meter_noise[row], 0.0, 1.0)
        m[self._missing[row]] = np.nan
        return m

    def _observe_step(self, t: int, a: int, e: int, deltas, anomalies) -> None:
        """What the agent sees of step ``t`` under the observation condition."""
        row = HISTORY + t
        if self.observe == "noisy":
            missing = self._missing[t + 1]
            m = self._noisy_meters(t + 1, np.array(self._m))
            d = np.clip(np.array(deltas) + self._delta_noise[t], -1.0, 1.0)
            d[missing] = np.nan
            x = fb.observed_anomalies(self._om, t & 3, a, e, d)
            r = fb.observed_reward(self._w, d, m)
            shown_a, shown_e = a, e
        else:  # answers-only
            m = np.full(spec.N_METERS, np.nan)
            d = np.full(spec.N_METERS, np.nan)
            x = np.full(spec.N_METERS, np.nan)
            r = float("nan")
            accepted = not self.feedback or self._ans == fb.ANSWER_ACCEPTED
            shown_a, shown_e = (a if accepted else NO_ACTION), 0
        self._om = m
        self._olast = (d, x, shown_a, r, shown_e)
        self._ohist_a[row] = shown_a
        self._ohist_r[row] = r
        self._ohist_d[row] = d

    def _obs_feedback(self) -> dict[str, Any]:
        t = self._t
        if self.observe == "clean":
            deltas, anomalies, a, r, e = self._last
            meters, ha, hr, hd = self._m, self._hist_a, self._hist_r, self._hist_d
        else:
            deltas, anomalies, a, r, e = self._olast
            meters, ha, hr, hd = self._om, self._ohist_a, self._ohist_r, self._ohist_d
        obs = {
            "t": t,
            "day": t >> 2,
            "slot": t & 3,
            "remaining_steps": _T - t,
            "meters": np.array(meters, dtype=np.float64),
            "deltas": np.array(deltas, dtype=np.float64),
            "anomalies": np.array(anomalies, dtype=np.float64),
            "last_action": a,
            "last_reward": np.array([r], dtype=np.float64),
            "active_event": e,
            "history_actions": ha[t : t + HISTORY].copy(),
            "history_rewards": hr[t : t + HISTORY].copy(),
            "history_deltas": hd[t : t + HISTORY].copy(),
        }
        if self.feedback:
            obs["last_answer"] = self._ans
            obs["last_recommendation"] = self._rec
        return obs

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._t is None:
            return "(not started)"
        t = self._t
        meters = " ".join(f"{k}={v:.2f}" for k, v in zip(spec.METER_LETTERS, self._m, strict=True))
        _, _, a, r, e = self._last
        last = "-" if a == NO_ACTION else spec.ACTIONS[a]
        return (
            f"t={t} day={t // 4} slot={spec.SLOTS[t % 4] if t < _T else '-'} {meters} "
            f"last={last} r={r:+.3f} event={spec.EVENTS[e]}"
        )


def _week_lists(tables: worlds.WeekTables) -> tuple:
    """A world's per-step tables as nested lists (const, scaled, events, threshold, noise)
    and the tables themselves."""
    return (
        tables.const.tolist(),
        tables.scaled.tolist(),
        tables.events.tolist(),
        tables.spiral_threshold.tolist(),
        tables.noise.tolist(),
        tables,
    )


def _neutral_lists():
    const, scaled, ev, thr, _ = profile_lists(Profile.neutral())
    return const, scaled, ev, thr


def start_meters(values: Any) -> np.ndarray:
    """The ``meters`` reset option checked: five finite numbers in [0, 1]."""
    m = np.asarray(values, dtype=np.float64)
    if m.shape != (spec.N_METERS,) or not np.isfinite(m).all() or (m < 0).any() or (m > 1).any():
        raise ValueError(f"meters must be {spec.N_METERS} numbers in [0, 1], got {values!r}")
    return m
