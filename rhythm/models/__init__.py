"""Package data: the student ``rhythm recommend`` asks on real days (``student-real-q8_0.gguf``,
prompt format v4) and its ``MODEL_CARD_real.md``. ``rhythm recommend`` uses it by default when
llama-cpp-python is installed (setting ``agent_backend``). The simulator student (format v1)
lives in the lab: ``agent/lab/models``."""
