-- One truth per metric (issue 24): when two devices measure the same thing, one source per
-- metric and time window is used, by a priority of *device kinds* per metric group; every
-- source's rows stay in the tables (and raw payloads in raw_*). `rhythm sources` shows and
-- changes the priority; the *_merged views (storage/views) apply it.
CREATE TABLE source_priority (
    grp VARCHAR NOT NULL,   -- sleep | activity | vitals | heart_rate | workouts
    kind VARCHAR NOT NULL,  -- ring | strap | watch | phone | other
    rank INTEGER NOT NULL,  -- 1 wins
    PRIMARY KEY (grp, kind)
);
INSERT INTO source_priority VALUES
    -- sleep: worn all night and made for it: the ring, then the strap, then the watch
    ('sleep', 'ring', 1), ('sleep', 'strap', 2), ('sleep', 'watch', 3), ('sleep', 'phone', 4), ('sleep', 'other', 5),
    -- steps, energy, distance: the watch on the wrist counts every step; the phone only when carried
    ('activity', 'watch', 1), ('activity', 'ring', 2), ('activity', 'strap', 3), ('activity', 'phone', 4), ('activity', 'other', 5),
    -- HRV, resting heart rate, recovery, SpO2, temperature: measured at night, ring and strap first
    ('vitals', 'ring', 1), ('vitals', 'strap', 2), ('vitals', 'watch', 3), ('vitals', 'phone', 4), ('vitals', 'other', 5),
    -- heart rate through the day: the watch samples most often
    ('heart_rate', 'watch', 1), ('heart_rate', 'strap', 2), ('heart_rate', 'ring', 3), ('heart_rate', 'phone', 4), ('heart_rate', 'other', 5),
    -- workouts: the device that tracked it with GPS and heart rate
    ('workouts', 'watch', 1), ('workouts', 'strap', 2), ('workouts', 'ring', 3), ('workouts', 'phone', 4), ('workouts', 'other', 5);

-- The kind of device behind a row: from the source, then the app/device name and device
-- string Apple Health keeps (`...model:Watch...`) and Health Auto Export's device list
-- (`Apple Watch|iPhone`: a watch was among them).
CREATE MACRO device_kind(src, name, dev) AS CASE
    WHEN src = 'oura' OR coalesce(name, '') ILIKE '%oura%' THEN 'ring'
    WHEN src = 'whoop' OR coalesce(name, '') ILIKE '%whoop%' THEN 'strap'
    WHEN src = 'garmin' OR coalesce(name, '') ILIKE '%garmin%' OR coalesce(dev, '') ILIKE '%watch%'
         OR coalesce(name, '') ILIKE '%watch%' THEN 'watch'
    WHEN coalesce(dev, '') ILIKE '%iphone%' OR coalesce(name, '') ILIKE '%iphone%'
         OR coalesce(name, '') ILIKE '%phone%' THEN 'phone'
    ELSE 'other'
END;

-- The group of a sample metric; cumulative ("activity") metrics are chosen per local hour,
-- the others per local day.
CREATE MACRO metric_group(m) AS CASE
    WHEN m IN ('steps', 'active_energy', 'basal_energy', 'total_energy', 'distance', 'floors',
               'exercise_time', 'intensity_minutes', 'stand_hour', 'mindful') THEN 'activity'
    WHEN m IN ('heart_rate', 'walking_heart_rate') THEN 'heart_rate'
    WHEN m = 'sleep_stage' THEN 'sleep'
    ELSE 'vitals'
END;
