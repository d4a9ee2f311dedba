"""The lab's agents: simulator-only agents, references and the student wrappers, and the
policy registry of ``rhythm sim eval`` (:mod:`agent.lab.policies`). The product (``rhythm
recommend`` and the daily run) never imports this package (an import contract says so).

- ``policies``: the registry by group (teachers, the day planner, references; ablations for
  benchmarks only);
- ``horizon``: the real-day planner's objective as a simulator policy (``day-planner``);
- ``robust``: the teacher that learns per-action effects and its own model error;
- ``ideal``: the exact-posterior reference;
- ``llm_policy``, ``student_policy``: a local model as a simulator policy (the students);
- ``models``: the bundled simulator student (format v1) and its model card.
"""
