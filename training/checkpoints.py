"""A student checkpoint folder (stage 3: ``save_pretrained`` + ``tokenizer.json`` +
``checkpoint.json``) read back: the prompt format it was trained on, the PyTorch model (a
LoRA adapter merged in when given), and the model written as an f32 GGUF for llama.cpp.

A shipped student GGUF read back into PyTorch (:func:`load_gguf_student`, with its prompt
format :func:`gguf_prompt_format`): what per-person refinement (training/answers.py) and the
action bias (training/calibrate.py) start from.

Used by training/export.py, training/dagger.py (the student plays under llama.cpp),
training/student.py, training/pipeline.py, training/answers.py and training/calibrate.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from training.common import quiet_libraries
from training.tokens import EOS, load_tokenizer


def checkpoint_prompt_format(checkpoint: str | Path) -> str:
    """The prompt format a checkpoint folder was trained on (v1 when it does not say; a
    retired format raises ValueError, :func:`agent.prompting.model_prompt_format`)."""
    from agent.prompting import model_prompt_format

    p = Path(checkpoint) / "checkpoint.json"
    desc = json.loads(p.read_text()) if p.exists() else {}
    return model_prompt_format(desc.get("prompt_format"))


def load_student(checkpoint: str | Path, adapter: str = ""):
    """The PyTorch model (with a LoRA adapter merged in when given)."""
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(str(checkpoint)).eval()
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter).merge_and_unload().eval()
    return model


def write_gguf(
    model, tokenizer_path: Path, path: Path, prompt_format: str = "rhythm v1", metadata: dict[str, str] | None = None
) -> Path:
    """``model`` as an f32 GGUF at ``path`` (``<|endoftext|>`` as BOS and EOS, the prompt
    format and any ``metadata`` string keys in the metadata)."""
    from agent.prompting import GGUF_FORMAT_KEY
    from training.gguf_writer import LlamaConfig, write_llama_gguf

    tok = load_tokenizer(tokenizer_path)
    eos = tok.token_to_id(EOS)
    config = LlamaConfig.from_hf(
        model.config, bos_token_id=eos, eos_token_id=eos, add_bos_token=True, name="rhythm-student"
    )
    tensors = dict(model.state_dict())
    if model.config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)  # llama.cpp ties the output to token_embd
    return write_llama_gguf(
        path, config, tensors, tok, dtype="f32", metadata={**(metadata or {}), GGUF_FORMAT_KEY: prompt_format}
    )


def gguf_string(path: Path, key: str) -> str | None:
    """The string metadata ``key`` of a GGUF, or None when it has none."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).fields.get(key)
    return None if field is None else bytes(field.parts[-1]).decode()


def gguf_prompt_format(path: Path) -> str | None:
    """The prompt format a student GGUF says it reads (``rhythm.prompt_format``), or None."""
    from agent.prompting import GGUF_FORMAT_KEY

    return gguf_string(path, GGUF_FORMAT_KEY)


def load_gguf_student(path: Path):
    """(model, tokenizer) of a student GGUF: ``LlamaForCausalLM`` with dequantized weights
    and a ``tokenizers.Tokenizer`` built from the GGUF's vocabulary."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    quiet_libraries()
    path = Path(path)
    model = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).backend_tokenizer
    return model, tok
