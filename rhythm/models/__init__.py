"""Package data: the distilled student shipped with Rhythm (``student-q8_0.gguf``) and its
``MODEL_CARD.md``, written by ``python -m training.pipeline --ship``. ``rhythm recommend``
uses it by default when llama-cpp-python is installed (setting ``agent_backend``)."""
