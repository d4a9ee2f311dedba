"""Every number of ../shared/specs/simulator.md, in one place.

Nothing here computes anything; the other modules read these constants. Section numbers refer
to the spec. Changing a value here changes the environment: bump ``ENV_ID`` when you do.
"""

from __future__ import annotations

ENV_ID = "Rhythm-v0"

# --- 1. Time ---------------------------------------------------------------------------------
DAYS = 7
SLOTS_PER_DAY = 4
EPISODE_STEPS = DAYS * SLOTS_PER_DAY  # 28
SLOTS: tuple[str, ...] = ("morning", "afternoon", "evening", "night")
MORNING, AFTERNOON, EVENING, NIGHT = range(4)

# --- 2. Meters -------------------------------------------------------------------------------
METERS: tuple[str, ...] = ("vitality", "cognition", "progress", "serenity", "connection")
METER_LETTERS: tuple[str, ...] = ("V", "C", "P", "S", "N")
V, C, P, S, N = range(5)
N_METERS = 5
INITIAL_METERS: tuple[float, ...] = (0.70, 0.70, 0.50, 0.70, 0.70)
INITIAL_JITTER = 0.05  # uniform in [-0.05, 0.05] per meter

# --- 3.1 Base effects (V, C, P, S, N) ----------------------------------------------------------
ACTIONS: tuple[str, ...] = (
    "DEEP_WORK",
    "ADMIN_WORK",
    "LEARN",
    "SLEEP",
    "EXERCISE",
    "MEDITATE",
    "FAMILY_TIME",
    "SOCIALIZE",
    "ME_TIME",
    "BINGE_WATCH",
)
N_ACTIONS = len(ACTIONS)
(
    DEEP_WORK,
    ADMIN_WORK,
    LEARN,
    SLEEP,
    EXERCISE,
    MEDITATE,
    FAMILY_TIME,
    SOCIALIZE,
    ME_TIME,
    BINGE_WATCH,
) = range(N_ACTIONS)
WORK_ACTIONS: tuple[int, ...] = (DEEP_WORK, ADMIN_WORK, LEARN)
SOCIAL_ACTIONS: tuple[int, ...] = (FAMILY_TIME, SOCIALIZE)

EFFECT: tuple[tuple[float, ...], ...] = (
    (-0.12, -0.10, +0.18, -0.05, 0.00),  # DEEP_WORK
    (-0.05, -0.04, +0.08, -0.02, 0.00),  # ADMIN_WORK
    (-0.06, -0.06, +0.10, +0.03, 0.00),  # LEARN
    (+0.18, +0.10, 0.00, +0.03, 0.00),  # SLEEP
    (+0.08, +0.04, 0.00, +0.07, 0.00),  # EXERCISE
    (+0.02, +0.07, 0.00, +0.14, 0.00),  # MEDITATE
    (-0.02, 0.00, 0.00, +0.05, +0.15),  # FAMILY_TIME
    (-0.05, 0.00, 0.00, +0.02, +0.12),  # SOCIALIZE
    (+0.05, +0.02, 0.00, +0.08, -0.02),  # ME_TIME
    (+0.03, -0.06, 0.00, +0.05, -0.02),  # BINGE_WATCH
)

# --- 3.2 Time of day -------------------------------------------------------------------------
CHRONO_AMPLITUDE = 0.6
CHRONO_K: tuple[float, ...] = (+0.5, +0.2, -0.2, -0.5)
SLEEP_SLOT_MULT: tuple[float, ...] = (0.7, 0.5, 0.8, 1.3)
SOCIAL_N_SLOT_MULT: tuple[float, ...] = (0.8, 1.0, 1.2, 0.9)
NIGHT_V_PENALTY = -0.04  # any action other than SLEEP taken at night

# --- 3.3 Vitality factor: fv = clip(0.4 + 0.6 * V / 0.7, 0.4, 1.15) ---------------------------
FV_BASE = 0.4
FV_SLOPE = 0.6
FV_REF = 0.7
FV_MIN = 0.4
FV_MAX = 1.15

# --- 3.4 Passive drift (V is multiplied by metabolic_rate) ------------------------------------
DRIFT_V = -0.015
DRIFT_C = -0.010
DRIFT_P = -0.016  # spec default 0.022; set by calibration within [0.015, 0.030] (spec 9)
DRIFT_S = -0.008
DRIFT_N = -0.015
#: The spec's progress drift before calibration, and the range calibration may move it in.
SPEC_DRIFT_P = -0.022
PROGRESS_DRIFT_RANGE = (-0.030, -0.015)

# --- 3.5 Random events -----------------------------------------------------------------------
EVENT_PROBABILITY = 0.12
#: Event ids: 0 = none, 1..6 in the table order.
EVENTS: tuple[str, ...] = (
    "none",
    "bad_night",
    "deadline_pressure",
    "friend_calls",
    "sick_day",
    "good_news",
    "family_conflict",
)
N_EVENTS = len(EVENTS) - 1  # 6 real events
EVENT_EFFECT: tuple[tuple[float, ...], ...] = (
    (0.0, 0.0, 0.0, 0.0, 0.0),  # none
    (-0.10, -0.06, 0.0, 0.0, 0.0),  # bad_night
    (0.0, 0.0, +0.03, -0.08, 0.0),  # deadline_pressure
    (0.0, 0.0, 0.0, +0.02, +0.06),  # friend_calls
    (-0.15, -0.05, 0.0, 0.0, 0.0),  # sick_day
    (0.0, +0.03, 0.0, +0.06, 0.0),  # good_news
    (0.0, 0.0, 0.0, -0.06, -0.08),  # family_conflict
)
EVENT_SCALE_BASE = 1.3  # effect x (1.3 - 0.8 * event_resilience)
EVENT_SCALE_RESILIENCE = 0.8

# --- 3.6 Stress spiral -----------------------------------------------------------------------
SPIRAL_THRESHOLD_BASE = 0.40  # S < 0.40 - 0.25 * stress_tolerance
SPIRAL_THRESHOLD_TOLERANCE = 0.25
SPIRAL_V = -0.02
SPIRAL_C = -0.03

# --- 3 step 7: noise -------------------------------------------------------------------------
NOISE_SD = 0.012

# --- 4. Profile ------------------------------------------------------------------------------
#: The ten modifiers, in the order used by every array representation of a profile
#: (the 15-vector is w[0..4] followed by these).
MODIFIERS: tuple[str, ...] = (
    "social_vitality",
    "social_serenity",
    "morning",
    "work_vitality_recovery",
    "progress_serenity_bonus",
    "leisure_guilt",
    "solo_recharge",
    "metabolic_rate",
    "stress_tolerance",
    "event_resilience",
)
MODIFIER_RANGES: dict[str, tuple[float, float]] = {
    "social_vitality": (-1.0, 1.0),
    "social_serenity": (-1.0, 1.0),
    "morning": (0.0, 1.0),
    "work_vitality_recovery": (-1.0, 1.0),
    "progress_serenity_bonus": (-1.0, 1.0),
    "leisure_guilt": (-1.0, 1.0),
    "solo_recharge": (-1.0, 1.0),
    "metabolic_rate": (0.6, 1.4),
    "stress_tolerance": (0.0, 1.0),
    "event_resilience": (0.0, 1.0),
}
MODIFIER_NEUTRAL: dict[str, float] = {
    "social_vitality": 0.0,
    "social_serenity": 0.0,
    "morning": 0.5,
    "work_vitality_recovery": 0.0,
    "progress_serenity_bonus": 0.0,
    "leisure_guilt": 0.0,
    "solo_recharge": 0.0,
    "metabolic_rate": 1.0,
    "stress_tolerance": 0.5,
    "event_resilience": 0.5,
}
N_PARAMS = 15
# Column of each parameter in the 15-vector.
W_COLS = slice(0, 5)
COL = {name: 5 + i for i, name in enumerate(MODIFIERS)}

# Modifier effect coefficients (section 4 table): parameter -> ((action, meter, coef), ...)
MODIFIER_EFFECTS: dict[str, tuple[tuple[int, int, float], ...]] = {
    "social_vitality": ((SOCIALIZE, V, 0.13), (FAMILY_TIME, V, 0.06)),
    "social_serenity": ((SOCIALIZE, S, 0.08), (FAMILY_TIME, S, 0.05)),
    "work_vitality_recovery": ((DEEP_WORK, V, 0.10), (ADMIN_WORK, V, 0.05), (LEARN, V, 0.05)),
    "progress_serenity_bonus": ((DEEP_WORK, S, 0.08), (ADMIN_WORK, S, 0.08), (LEARN, S, 0.08)),
    "leisure_guilt": ((BINGE_WATCH, S, -0.10), (ME_TIME, S, -0.10)),
    "solo_recharge": (
        (ME_TIME, V, 0.05),
        (ME_TIME, S, 0.05),
        (MEDITATE, V, 0.05),
        (MEDITATE, S, 0.05),
    ),
}

# --- 4.1 Sampling ----------------------------------------------------------------------------
PROFILE_SEED_XOR = 0xA3C5F729
IN_DIST_DIRICHLET = 1.0
OOD_DIRICHLET = 0.3
MIDDLE_FRACTION = 0.70  # in-distribution: the middle 70% of each range
TAIL_FRACTION = 0.15  # OOD: the outer 15% on either side ...
OOD_TAIL_PROBABILITY = 0.5  # ... with probability 0.5, else the middle

NAMED_PROFILES: dict[str, dict[str, object]] = {
    "introvert_morning": {
        "w": (0.20, 0.20, 0.20, 0.30, 0.10),
        "social_vitality": -1.0,
        "social_serenity": -0.6,
        "morning": 0.9,
        "work_vitality_recovery": -0.3,
        "progress_serenity_bonus": 0.2,
        "leisure_guilt": -0.3,
        "solo_recharge": 0.8,
        "metabolic_rate": 1.0,
        "stress_tolerance": 0.5,
        "event_resilience": 0.5,
    },
    "extrovert_night_owl": {
        "w": (0.15, 0.10, 0.15, 0.20, 0.40),
        "social_vitality": 0.6,
        "social_serenity": 0.8,
        "morning": 0.1,
        "work_vitality_recovery": -0.4,
        "progress_serenity_bonus": -0.2,
        "leisure_guilt": 0.0,
        "solo_recharge": -0.5,
        "metabolic_rate": 1.1,
        "stress_tolerance": 0.6,
        "event_resilience": 0.6,
    },
    "workaholic_stoic": {
        "w": (0.075, 0.075, 0.70, 0.075, 0.075),
        "social_vitality": 0.0,
        "social_serenity": -0.2,
        "morning": 0.6,
        "work_vitality_recovery": 1.0,
        "progress_serenity_bonus": 0.8,
        "leisure_guilt": 0.8,
        "solo_recharge": 0.0,
        "metabolic_rate": 0.9,
        "stress_tolerance": 0.9,
        "event_resilience": 0.8,
    },
}

# --- 4.2 Belief ------------------------------------------------------------------------------
BELIEF_DIMS: tuple[str, ...] = ("social", "morning", "work")
BELIEF_W_REF = 0.4  # min(1, w / 0.4)

# --- 5. Reward -------------------------------------------------------------------------------
REWARD_DELTA_SCALE = 10.0
REWARD_LEVEL_SCALE = 1.0
REWARD_LEVEL_BASELINE = 0.5
REWARD_PROGRESS_BONUS = 0.5
REWARD_CONNECTION_BONUS = 0.4
REWARD_CRASH_PENALTY = -0.5
CRASH_THRESHOLD = 0.10

# --- 8. Grader -------------------------------------------------------------------------------
GRADER_WEIGHTS: dict[str, float] = {
    "crash_free": 0.15,
    "progress": 0.20,
    "connection": 0.10,
    "adaptation": 0.25,
    "efficiency": 0.10,
    "belief_accuracy": 0.20,
}
MAX_CRASHES = EPISODE_STEPS * N_METERS  # 140
HALF_EPISODE = EPISODE_STEPS // 2  # early = steps 0-13, late = steps 14-27

# Frozen by calibration (spec 9; `python -m simulator.calibrate`, see docs/simulator.md),
# together with DRIFT_P above. The prototype used A = 0.5, Q = 0.8, E = 0.5.
GRADER_A = 0.5
GRADER_Q = 1.0
GRADER_E = 0.7

# --- 9. Evaluation protocol and published figures --------------------------------------------
CONDITIONS: tuple[str, ...] = ("in-dist", "ood", "discrete")
CONDITION_SEEDS: dict[str, range] = {
    "in-dist": range(0, 100),
    "ood": range(10000, 10050),
    "discrete": range(0, 5),  # per named profile
}
