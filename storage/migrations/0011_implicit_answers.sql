-- Answers without typing (issue 38). What the stored data says happened to a recommendation
-- once its time had passed (mapping/judge.py), beside the person's explicit answers in
-- `feedback` (an explicit answer always wins: storage.plans.answers).
-- source: 'implicit' (wearables, tasks, the person's own calendar) or 'calendar' (what the
-- person did to Rhythm's pushed block: deleted, moved); evidence: a JSON list of sentences;
-- confidence: 0..1, how much the answer likelihood trusts it; moved_*: where the person moved
-- a pushed block (a time preference, not a rejection).
CREATE TABLE answers_implicit (
    recommendation_id BIGINT PRIMARY KEY,
    response VARCHAR NOT NULL CHECK (response IN ('accept', 'ignore')),
    source VARCHAR NOT NULL CHECK (source IN ('implicit', 'calendar')),
    evidence JSON,
    confidence DOUBLE NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    moved_start_ts TIMESTAMPTZ,
    moved_end_ts TIMESTAMPTZ,
    "at" TIMESTAMPTZ NOT NULL
);

-- Rhythm's blocks as last pushed to a Google calendar (`rhythm plan push google`): which event
-- holds which recommendation, and when it was put there, so the next sync can read what the
-- person did to it. One row per calendar and block key (the latest recommendation pushed).
CREATE TABLE pushed_blocks (
    calendar_id VARCHAR NOT NULL,
    block_key VARCHAR NOT NULL,
    recommendation_id BIGINT NOT NULL,
    event_id VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    pushed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (calendar_id, block_key)
);
