-- The real-day planner has one name (issue 35): `day-planner` (agent.day.PLANNER_NAME), in
-- the database, `rhythm sim eval --policy` and the docs. Blocks it chose were stored as
-- `bayes-v1`; a block a local model chose keeps its `llm:<file>` name.
UPDATE recommendations SET model = 'day-planner' WHERE model = 'bayes-v1';
