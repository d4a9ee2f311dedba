-- Raw payloads as received, one table per source (STYLE rule 4: land raw, then derive).
CREATE TABLE raw_healthkit (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
CREATE TABLE raw_garmin   (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
CREATE TABLE raw_whoop    (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));
CREATE TABLE raw_calendar (kind VARCHAR NOT NULL, natural_key VARCHAR NOT NULL, fetched_at TIMESTAMPTZ NOT NULL, payload JSON, hash VARCHAR NOT NULL, PRIMARY KEY (kind, natural_key));

-- Every normalised measurement. Instants have end_ts = start_ts.
CREATE TABLE samples (
    source VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    value DOUBLE,
    unit VARCHAR,
    local_day DATE NOT NULL,
    source_name VARCHAR NOT NULL DEFAULT '',
    device VARCHAR,
    tz_offset_min INTEGER,
    detail VARCHAR,
    PRIMARY KEY (source, metric, source_name, start_ts, end_ts)
);

CREATE TABLE sleep_sessions (
    source VARCHAR NOT NULL,
    session_id VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    local_day DATE NOT NULL,
    sleep_min DOUBLE,
    in_bed_min DOUBLE,
    awake_min DOUBLE,
    light_min DOUBLE,
    deep_min DOUBLE,
    rem_min DOUBLE,
    efficiency_pct DOUBLE,
    score DOUBLE,
    is_nap BOOLEAN NOT NULL DEFAULT false,
    respiratory_rate_brpm DOUBLE,
    hrv_rmssd_ms DOUBLE,
    resting_hr_bpm DOUBLE,
    tz_offset_min INTEGER,
    source_name VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (source, session_id)
);

CREATE TABLE workouts (
    source VARCHAR NOT NULL,
    workout_id VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    local_day DATE NOT NULL,
    sport VARCHAR NOT NULL,
    duration_min DOUBLE,
    energy_kcal DOUBLE,
    distance_m DOUBLE,
    avg_hr_bpm DOUBLE,
    max_hr_bpm DOUBLE,
    strain DOUBLE,
    tz_offset_min INTEGER,
    source_name VARCHAR NOT NULL DEFAULT '',
    PRIMARY KEY (source, workout_id)
);

CREATE TABLE events (
    source VARCHAR NOT NULL,
    calendar_id VARCHAR NOT NULL,
    event_id VARCHAR NOT NULL,
    start_ts TIMESTAMPTZ NOT NULL,
    end_ts TIMESTAMPTZ NOT NULL,
    all_day BOOLEAN NOT NULL,
    local_day DATE NOT NULL,
    title VARCHAR,
    description VARCHAR,
    location VARCHAR,
    status VARCHAR NOT NULL DEFAULT 'confirmed',
    attendees_count INTEGER,
    self_response VARCHAR,
    event_type VARCHAR,
    transparency VARCHAR,
    timezone VARCHAR,
    recurring_event_id VARCHAR,
    updated_at TIMESTAMPTZ,
    action VARCHAR,
    PRIMARY KEY (source, calendar_id, event_id)
);

-- Derived by `rhythm map` (rebuilt from the tables above, no network).
CREATE TABLE meters (
    local_day DATE NOT NULL,
    slot VARCHAR NOT NULL,
    vitality DOUBLE,
    cognition DOUBLE,
    progress DOUBLE,
    serenity DOUBLE,
    connection DOUBLE,
    confidence DOUBLE,
    evidence JSON,
    computed_at TIMESTAMPTZ,
    PRIMARY KEY (local_day, slot)
);

CREATE TABLE slot_actions (
    local_day DATE NOT NULL,
    slot VARCHAR NOT NULL,
    action VARCHAR,
    confidence DOUBLE,
    evidence JSON,
    computed_at TIMESTAMPTZ,
    PRIMARY KEY (local_day, slot)
);

CREATE SEQUENCE recommendations_id_seq START 1;
CREATE TABLE recommendations (
    id BIGINT PRIMARY KEY DEFAULT nextval('recommendations_id_seq'),
    created_at TIMESTAMPTZ NOT NULL,
    local_day DATE NOT NULL,
    slot VARCHAR NOT NULL,
    action VARCHAR NOT NULL,
    belief_social DOUBLE,
    belief_morning DOUBLE,
    belief_work DOUBLE,
    belief_sd_social DOUBLE,
    belief_sd_morning DOUBLE,
    belief_sd_work DOUBLE,
    rationale VARCHAR,
    model VARCHAR NOT NULL
);

CREATE TABLE feedback (
    recommendation_id BIGINT PRIMARY KEY,
    response VARCHAR NOT NULL CHECK (response IN ('accept', 'ignore')),
    "at" TIMESTAMPTZ NOT NULL  -- quoted: AT is a keyword
);

CREATE TABLE sync_state (
    source VARCHAR NOT NULL,
    stream VARCHAR NOT NULL,
    cursor VARCHAR,
    updated_at TIMESTAMPTZ NOT NULL,
    last_error VARCHAR,
    PRIMARY KEY (source, stream)
);

-- One row per import or sync run: what it did and whether it worked.
CREATE SEQUENCE runs_id_seq START 1;
CREATE TABLE runs (
    id BIGINT PRIMARY KEY DEFAULT nextval('runs_id_seq'),
    kind VARCHAR NOT NULL,
    source VARCHAR,
    target VARCHAR,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    ok BOOLEAN,
    summary JSON
);
