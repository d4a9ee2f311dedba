"""The teacher: a Bayesian model-predictive planner that maximises the expected final grade.

Every decision:

1. absorb the last step into the posterior (:class:`agent.belief.BeliefState`);
2. draw K profiles from the posterior (the posterior mean plus K - 1 fixed quasi-random
   draws, so the plan's score is smooth from one step to the next) with the exact reward
   weights;
3. improve the week's remaining plan (an open-loop action sequence, warm-started from the
   previous decision's plan) by a few rounds of best single-substitution search: every plan
   that differs from the current one in one position is rolled out for all K profiles at
   once (:class:`PlanModel`, expected dynamics, the random event replaced by its
   expectation) and scored with the spec 8 grader: realised rewards so far plus simulated
   ones (adaptation, efficiency), final progress and connection, crashes, plus the
   *expected belief accuracy* the plan would leave at the end of the week (the posterior
   covariance after the plan's observations, through the linearised spec 4.2 truth
   function): this is what makes the planner probe, and only when a probe is worth it;
4. take the plan's first action and emit the posterior-median belief.

Decisions cost a few milliseconds on one core (``benchmarks/bayes_agent.py`` measures them).

Feedback mode (../shared/specs/feedback.md; the agent is told by ``configure``): the action is
a recommendation the person may ignore, and then does their habit. The plan model then
rolls out the *expected* week: at each step the recommendation is accepted with the answer
model's probability under each sampled profile, else the habit (spec 9 heuristic) applies,
and meters, rewards and crashes are the mixture of both (:meth:`PlanModel.simulate` with
``feedback=True``). Answers enter the belief by their likelihood (:mod:`agent.answers`).
Under the ``noisy`` and ``answers-only`` observation conditions the meters the plan starts
from, and the rewards of the week so far, are the belief's estimates where not observed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from agent.answers import TYPICAL_METERS, accept_probabilities, answer_information
from agent.belief import BeliefState, filter_belief
from agent.world import INFO, PlanModel, expected_belief_accuracy
from simulator import spec
from simulator.feedback import OBS_NOISE_SD, check_observe
from simulator.policies import heuristic_action

_T = spec.EPISODE_STEPS
_W = spec.GRADER_WEIGHTS

def neighbours(plan: np.ndarray) -> np.ndarray:
    """Every plan equal to ``plan`` except in one position (10 x len rows, ``plan`` included)."""
    n = len(plan)
    c = np.repeat(plan[None, :], n * spec.N_ACTIONS, axis=0)
    idx = np.arange(n * spec.N_ACTIONS)
    c[idx, idx // spec.N_ACTIONS] = idx % spec.N_ACTIONS
    return c


def apply_forced(plan: np.ndarray, forced: Mapping[int, int]) -> np.ndarray:
    """A copy of ``plan`` with the ``forced`` actions (position -> action) in place."""
    out = np.array(plan, dtype=np.int64)
    for p, a in forced.items():
        if not 0 <= int(p) < len(out) or not 0 <= int(a) < spec.N_ACTIONS:
            raise ValueError(f"forced position {p} -> action {a} is outside the plan or the actions")
        out[int(p)] = int(a)
    return out


def calendar_forced(calendar, t: int) -> dict[int, int]:
    """The fixed slots of a week's ``calendar`` (28 action ids, :data:`simulator.calendar.NO_ACTION`
    = free) from step ``t`` on, as plan positions (0 = step ``t``) -> the commitment's action."""
    cal = np.asarray(calendar, dtype=np.int64).reshape(-1)
    if len(cal) != _T:
        raise ValueError(f"a week's calendar has {_T} slots, got {len(cal)}")
    return {s - t: int(cal[s]) for s in range(t, _T) if 0 <= cal[s] < spec.N_ACTIONS}


_DEFAULT_PLANS: dict[tuple[float, float], np.ndarray] = {}


def default_plan(
    prior_scale: float = 1.3, info_weight: float = _W["belief_accuracy"]
) -> np.ndarray:
    """The week's plan before any observation: the heuristic's week improved to convergence
    for the prior-mean person (uniform weights) from the mean initial meters. Computed once
    per process and cached; every episode's first decision starts from it."""
    key = (float(prior_scale), float(info_weight))
    if key not in _DEFAULT_PLANS:
        bs = BeliefState(prior_scale=prior_scale)
        model = PlanModel(bs.profile_estimate().to_array()[None, :], bs.w)
        meters = np.array(spec.INITIAL_METERS)
        plan = np.array([heuristic_action(meters, s & 3) for s in range(_T)], dtype=np.int64)
        _DEFAULT_PLANS[key] = improve_plan(
            model, plan, meters, 0, [], 0, 60, info_weight, bs.prior_prec
        )
    return _DEFAULT_PLANS[key]


def improve_plan(
    model: PlanModel,
    plan: np.ndarray,
    meters: np.ndarray,
    t: int,
    past_rewards,
    past_crashes: int,
    rounds: int,
    info_weight: float,
    precision: np.ndarray,
    info_scale: float | None = None,
    first_bonus: np.ndarray | None = None,
    forced: Mapping[int, int] | None = None,
) -> np.ndarray:
    """``rounds`` of best-single-substitution search on ``plan`` (the remaining 28 - t actions);
    the score is the expected grade plus ``info_weight`` x the expected belief accuracy the
    plan leaves, given the current posterior ``precision``. Stops early at a local optimum.
    ``info_scale`` multiplies the per-step meter information (noisy or missing meters say
    less; None = 1); ``first_bonus`` (10,) is added to a plan's score by its first action
    (the value of what the answer to it would teach). ``forced``: plan position -> action
    (slots a calendar decides): the plan holds that action there from the start, the search
    never substitutes it, so every rollout applies it."""
    length = len(plan)
    slots = (t + np.arange(length)) & 3
    pos = np.arange(length * spec.N_ACTIONS) // spec.N_ACTIONS
    alt = np.arange(length * spec.N_ACTIONS) % spec.N_ACTIONS
    keep = None
    if forced:
        plan = apply_forced(plan, forced)
        free = np.ones(length, dtype=bool)
        free[list(forced)] = False
        if not free.any():
            return plan
        keep = free[pos]
        pos, alt = pos[keep], alt[keep]
    best = None
    for _ in range(rounds):
        cands = neighbours(plan) if keep is None else neighbours(plan)[keep]
        s = model.score(cands, meters, t, past_rewards, past_crashes)
        if info_weight > 0:
            info = INFO if info_scale is None or info_scale == 1.0 else INFO * info_scale
            base = precision + info[slots, plan].sum(axis=0)
            prec = base + info[slots[pos], alt] - info[slots[pos], plan[pos]]
            s = s + info_weight * expected_belief_accuracy(prec)
        if first_bonus is not None:
            s = s + first_bonus[cands[:, 0]]
        i = int(np.argmax(s))
        if best is not None and s[i] <= best + 1e-12:
            break
        best = float(s[i])
        plan = cands[i]
    return plan


#: How much one step's meter observation tells, relative to clean (noise variance ratio x
#: the share of meters seen), per observation condition.
_INFO_SCALE = {
    "clean": 1.0,
    "noisy": (1.0 - 0.3) * spec.NOISE_SD**2 / (spec.NOISE_SD**2 + OBS_NOISE_SD**2),
    "answers-only": 0.0,
}


#: Importance samples of the belief once there are answers, per observation condition.
_ANSWER_SAMPLES = {"clean": 2048, "noisy": 2048, "answers-only": 16384}


class BayesAgent:
    """The Bayesian teacher (simulator Policy protocol: ``reset(seed)``, ``act(obs)``).

    ``n_samples``: posterior profiles per rollout (K); ``rounds``: substitution-search rounds
    per decision; ``info_weight``: weight of the expected belief accuracy in the plan score
    (0.20 is the grader's; 0 gives the "bayes-noinfo" ablation); ``plan``: False skips the
    planner and acts like the spec 9 heuristic while still inferring ("belief-only").
    ``use_calendar``: plan around the week's fixed slots when the observation carries a
    ``calendar`` (:mod:`simulator.calendar`): those steps are forced to the commitment's
    action in every rollout and never searched over ("bayes-calendar"); without it (or
    without a calendar in the observation) every slot is planned as free.
    """

    def __init__(
        self,
        n_samples: int = 6,
        rounds: int = 3,
        info_weight: float = _W["belief_accuracy"],
        prior_scale: float = 1.3,
        plan: bool = True,
        first_rounds: int = 3,
        noise_sd: float = spec.NOISE_SD,
        ask_weight: float = 3.0,
        accept_weight: float = 0.006,
        ask_conditions: tuple[str, ...] = ("noisy", "answers-only"),
        use_calendar: bool = False,
    ):
        self.use_calendar = bool(use_calendar)
        self.ask_weight = float(ask_weight)
        self.accept_weight = float(accept_weight)
        self.ask_conditions = tuple(ask_conditions)
        self.feedback = False
        self.observe = "clean"
        self._noise_var = float(noise_sd) ** 2
        self.n_samples = int(n_samples)
        self.rounds = int(rounds)
        self.first_rounds = int(first_rounds)
        self.info_weight = float(info_weight)
        self.use_planner = bool(plan)
        self.belief_state = BeliefState(prior_scale=prior_scale, noise_sd=noise_sd)
        if self.use_planner:
            default_plan(prior_scale, self.info_weight)  # warm the per-process cache
        self.reset(0)

    def reset(self, seed: int) -> None:
        self._seed = int(seed)
        self.belief_state.reset(seed)
        self._plan: np.ndarray | None = None
        self._rewards: list[float] = []
        self._crashes = 0
        self._t = 0
        self._reason = "not started"
        self._calendar: np.ndarray | None = None

    def configure(self, feedback: bool = False, observe: str = "clean") -> None:
        """How the agent observes (feedback.md): feedback mode, and the observation condition
        (``clean``, ``noisy``: delta noise and meter readings noisier by sd 0.08,
        ``answers-only``: no meters, no events)."""
        self.feedback = bool(feedback)
        self.observe = check_observe(observe)
        bs = self.belief_state
        noisy = self.observe == "noisy"
        bs.noise_var = self._noise_var + (OBS_NOISE_SD**2 if noisy else 0.0)
        bs.meter_obs_sd = OBS_NOISE_SD if noisy else 0.0
        bs.events_observed = self.observe != "answers-only"
        # Without meters the posterior is the prior reweighted by the answers alone: more
        # importance samples keep enough of them carrying weight after 28 answers.
        bs.n_answer_samples = _ANSWER_SAMPLES[self.observe]
        bs.reset(self._seed)

    # -- protocol ---------------------------------------------------------------------------
    def act(self, observation: dict[str, Any]) -> tuple[int, np.ndarray]:
        obs = observation
        t = int(obs["t"])
        if t == 0:
            self.reset(self._seed)
            self.belief_state.update_from_observation(obs)  # the week's start (track only)
        elif t == self._t + 1 or t == len(self._rewards) + 1:
            self.belief_state.update_from_observation(obs)
            self._rewards.append(float(np.asarray(obs["last_reward"]).reshape(-1)[0]))
            self._crashes += int((np.asarray(obs["meters"]) < spec.CRASH_THRESHOLD).sum())
        self._t = t
        if self.use_calendar and obs.get("calendar") is not None:
            self._calendar = np.asarray(obs["calendar"], dtype=np.int64)
        meters = self.meters_now(obs)
        slot = int(obs["slot"])
        if t >= _T:
            return spec.SLEEP, self.belief()
        if not self.use_planner:
            a = heuristic_action(meters, slot)
            self._reason = f"{spec.ACTIONS[a]}: heuristic rule (belief-only ablation)"
            return a, self.belief()
        a = self._plan_action(meters, t)
        return a, self.belief()

    def belief(self) -> np.ndarray:
        return self.belief_state.belief()

    def final_belief(self, observation: dict[str, Any]) -> np.ndarray:
        """The belief after the week's last observation (its last answer included)."""
        return self.act(observation)[1]

    def filter_state(self, observation: dict[str, Any]) -> list[float]:
        """What the v4 prompt's ``b`` line says after the agent has read ``observation``:
        :func:`agent.belief.filter_belief` of its belief and of :meth:`meters_now`."""
        return filter_belief(self.belief_state, self.meters_now(observation))

    def meters_now(self, observation: dict[str, Any]) -> np.ndarray:
        """The meters the agent plans from at ``observation`` (after it has read it): the
        reading when every meter was observed, else the estimate (:meth:`_meters_estimate`)."""
        meters = np.asarray(observation["meters"], dtype=np.float64)
        return meters if np.isfinite(meters).all() else self._meters_estimate(meters)

    def _meters_estimate(self, meters: np.ndarray) -> np.ndarray:
        """The meters now where some are not observed: the samples' weighted estimate when
        the belief tracks the week, else the last reading of each meter, else typical."""
        bs = self.belief_state
        filtered = bs.meters_estimate()
        if filtered is not None:
            return filtered
        if bs.n_answers:
            s = bs.importance_samples()
            if s["states_now"] is not None:
                est = s["weights"] @ s["states_now"]
                return est if self.observe == "noisy" else np.where(np.isfinite(meters), meters, est)
        out = meters.copy()
        for step in reversed(bs._track):
            if np.isfinite(out).all():
                break
            out = np.where(np.isfinite(out), out, step.meters)
        return np.where(np.isfinite(out), out, TYPICAL_METERS)

    def _past_rewards(self, t: int) -> list[float]:
        """The week's rewards so far; unobserved ones (NaN) estimated from the samples'
        tracks of the meters when there are any, else the mean of the observed ones."""
        past = ([0.0] * t + self._rewards)[-t:] if t else []
        r = np.array(past, dtype=np.float64)
        missing = ~np.isfinite(r)
        if not missing.any():
            return past
        bs = self.belief_state
        est = None
        if bs.n_answers:
            s = bs.importance_samples()
            states = s.get("states")
            if states is not None and len(states) >= t + 1:
                w = s["params"][:, :5]
                d = states[1 : t + 1] - states[:t]
                new = states[1 : t + 1]
                rr = (
                    spec.REWARD_DELTA_SCALE * (w[None] * d).sum(-1)
                    + spec.REWARD_LEVEL_SCALE * ((w[None] * new).sum(-1) - spec.REWARD_LEVEL_BASELINE)
                    + spec.REWARD_PROGRESS_BONUS * d[..., spec.P]
                    + spec.REWARD_CONNECTION_BONUS * d[..., spec.N]
                    + spec.REWARD_CRASH_PENALTY * (new < spec.CRASH_THRESHOLD).sum(-1)
                )
                est = rr @ s["weights"]
        if est is None:
            est = np.full(t, float(r[~missing].mean()) if (~missing).any() else 0.0)
        return np.where(missing, est, r).tolist()

    def _ask_bonus(self, meters: np.ndarray, slot: int) -> np.ndarray | None:
        """Per first action: ``ask_weight`` x 0.4 x the expected drop of the belief's
        expected absolute error that its answer brings (feedback mode only)."""
        if not self.feedback or self.ask_weight <= 0 or self.observe not in self.ask_conditions:
            return None
        s = self.belief_state.importance_samples()
        states = s["states_now"] if s["states_now"] is not None else meters
        p = accept_probabilities(s["compact"], np.broadcast_to(states, (len(s["weights"]), 5)), slot)
        gain = answer_information(s["truth"], s["weights"], p)
        return self.ask_weight * 2.0 * _W["belief_accuracy"] * gain

    def explain(self) -> str:
        """A short reason for the last choice."""
        return self._reason

    def plan_ahead(
        self, meters: np.ndarray, t: int, week_rewards: list[float], crashes: int = 0
    ) -> list[tuple[int, str]]:
        """The real-data path: plan the rest of the week from step ``t`` with the belief as it
        stands (fed beforehand through ``belief_state``), given the rewards of the week so far.

        Returns (action, reason) for every remaining step, the first one decided now and the
        rest the plan it belongs to (re-planned at every later call)."""
        t = int(t)
        if t >= _T:
            return []
        self._rewards = [float(r) for r in week_rewards]
        self._crashes = int(crashes)
        self._plan = None
        self._t = t
        meters = np.asarray(meters, dtype=np.float64)
        if not self.use_planner:
            a = heuristic_action(meters, t % spec.SLOTS_PER_DAY)
            return [(a, f"{spec.ACTIONS[a]}: heuristic rule (belief-only ablation)")]
        first = self._plan_action(meters, t)
        out = [(first, self._reason)]
        for a in (self._plan if self._plan is not None else []):
            out.append((int(a), f"{spec.ACTIONS[int(a)]}: part of the best plan for the rest of the week"))
        return out

    # -- planning ---------------------------------------------------------------------------
    def _plan_model(self) -> tuple[PlanModel, float]:
        """The rollout model of this decision and the scale of a future step's information
        (hook: :class:`agent.lab.robust.RobustAgent` adds learned effects and caution)."""
        bs = self.belief_state
        params = bs.sample_params(self.n_samples)
        params[0] = bs.profile_estimate().to_array()
        answers = self.feedback or bs.n_answers > 0
        w = params[:, :5] if answers else bs.w
        return PlanModel(params, w, feedback=self.feedback, accept_weight=self.accept_weight), 1.0

    def _check_plan(self, plan: np.ndarray, model: PlanModel, meters: np.ndarray, t: int):
        """The plan to act on (hook: a safety layer may change its first action)."""
        return plan

    def _plan_action(self, meters: np.ndarray, t: int) -> int:
        bs = self.belief_state
        model, model_scale = self._plan_model()
        length = _T - t
        forced = None if self._calendar is None else calendar_forced(self._calendar, t)
        fresh = self._plan is None or len(self._plan) < length
        plan = self._initial_plan(meters, t) if fresh else self._plan[len(self._plan) - length :]
        # Joined mid-week (or skipped steps): unknown past rewards count as 0.
        past = ([0.0] * t + self._rewards)[-t:] if t else []
        info_weight, info_scale, bonus = self.info_weight, None, None
        if self.observe != "clean" or self.feedback:
            past = self._past_rewards(t)
            info_scale = _INFO_SCALE[self.observe]
            info_weight = info_weight if info_scale > 0 else 0.0
            bonus = self._ask_bonus(meters, t % spec.SLOTS_PER_DAY)
        scale = model_scale * (1.0 if info_scale is None else info_scale)
        plan = improve_plan(
            model,
            plan,
            meters,
            t,
            past,
            self._crashes,
            self.first_rounds if fresh else self.rounds,
            info_weight,
            bs.prior_prec + bs.data_precision(),
            None if scale == 1.0 else scale,
            bonus,
            forced,
        )
        plan = self._check_plan(plan, model, meters, t)
        if forced:  # the calendar decides those steps whatever a safety layer says
            plan = apply_forced(plan, forced)
        self._plan = plan[1:]
        a = int(plan[0])
        self._reason = self._describe(a, meters)
        return a

    def _initial_plan(self, meters: np.ndarray, t: int) -> np.ndarray:
        if t == 0:
            return default_plan(self.belief_state.prior_scale, self.info_weight).copy()
        return np.array([heuristic_action(meters, s & 3) for s in range(t, _T)], dtype=np.int64)

    def _describe(self, a: int, meters: np.ndarray) -> str:
        name = spec.ACTIONS[a]
        low = int(np.argmin(meters))
        sd = self.belief_state.belief_sd()
        if meters[low] < 0.25:
            return f"{name}: {spec.METERS[low]} {meters[low]:.2f} near crash"
        if a in spec.SOCIAL_ACTIONS and sd[0] > 0.08:
            return f"{name}: probing social (belief sd {sd[0]:.2f})"
        if a in spec.WORK_ACTIONS and max(sd[1], sd[2]) > 0.08:
            return f"{name}: progress, and probing work/morning (belief sd {max(sd[1], sd[2]):.2f})"
        return f"{name}: best expected grade over the rest of the week"
