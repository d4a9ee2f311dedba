"""Package data: the simulator student (``student-q8_0.gguf``, prompt format v1) and its
``MODEL_CARD.md``, written by ``python -m training.pipeline --ship`` from a v1 run. ``rhythm
sim eval --policy student`` plays it (:func:`agent.lab.student_policy.simulator_student_path`);
no real day asks it (the product's student is ``rhythm/models/student-real-q8_0.gguf``)."""
