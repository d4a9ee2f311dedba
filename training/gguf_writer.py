"""Write a Llama-architecture model with a byte-level BPE tokenizer as a GGUF file.

:func:`write_llama_gguf` takes Hugging Face ``LlamaForCausalLM`` tensor names (a
``state_dict`` as numpy arrays), a :class:`LlamaConfig` and a ``tokenizers.Tokenizer`` (or
its ``tokenizer.json``), and writes a GGUF that llama.cpp (llama-cpp-python) loads. Used by
the tests (random weights) and by training/export (a trained student).

Two llama.cpp conventions this file takes care of (``../shared/specs/local_llm.md``):

- The q and k projection rows are permuted from the Hugging Face rotary layout (halves) to
  llama.cpp's (interleaved pairs), exactly as llama.cpp's ``convert_hf_to_gguf.py`` does.
  Without it a trained model loads but outputs garbage, silently; with random weights it
  makes no visible difference, so verify a trained export against PyTorch logits
  (``tests/training/test_gguf_writer.py`` does, on a random ``LlamaForCausalLM``).
- ``tokenizer.ggml.pre`` is ``"gpt-2"`` (with the hyphen): llama.cpp then splits text with
  the GPT-2 regex, which is what a ``tokenizers`` ``ByteLevel(use_regex=True)``
  pre-tokenizer does. A tokenizer with another pre-tokenizer would tokenize differently.

Only numpy and the ``gguf`` package are needed (no torch). Matrices are written as f32 or
f16; 1-D tensors (norms) always as f32. Quantize afterwards with llama-cpp-python's
``llama_model_quantize`` if wanted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: GGUF token types (llama.cpp ``llama_token_type``).
TOKEN_NORMAL = 1
TOKEN_CONTROL = 3
TOKEN_UNUSED = 5


@dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters of a Llama model (field names as in Hugging Face's LlamaConfig).

    ``bos_token_id``/``eos_token_id`` are tokenizer ids; ``add_bos_token`` tells llama.cpp
    whether to put BOS in front of every prompt (match what the model was trained with)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    add_bos_token: bool = False
    name: str = "rhythm-llama"

    @property
    def n_kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_hf(cls, hf_config: Any, **overrides: Any) -> LlamaConfig:
        """From a transformers ``LlamaConfig`` (or any object with the same attributes)."""
        names = cls.__dataclass_fields__
        values = {
            k: getattr(hf_config, k) for k in names if getattr(hf_config, k, None) is not None
        }
        rope = getattr(hf_config, "rope_parameters", None) or {}
        if "rope_theta" not in values and isinstance(rope, Mapping) and "rope_theta" in rope:
            values["rope_theta"] = float(rope["rope_theta"])
        values.update(overrides)
        return cls(**values)


def permute_qk(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """Hugging Face rotary layout -> llama.cpp's, for a q (``n_heads``) or k (``n_kv_heads``)
    projection weight of shape ``(n_heads * head_dim, hidden)``."""
    rows = weight.shape[0]
    return (
        weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_TOP_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
_SKIPPED = re.compile(r".*rotary_emb\.inv_freq$")


def gguf_tensor_name(hf_name: str) -> str:
    """The GGUF name of a Hugging Face Llama tensor; ValueError for an unknown one."""
    if hf_name in _TOP_NAMES:
        return _TOP_NAMES[hf_name]
    m = _LAYER.fullmatch(hf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"blk.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}"
    raise ValueError(f"unknown Llama tensor {hf_name!r}")


def _tokenizer_json(tokenizer: Any) -> dict[str, Any]:
    if isinstance(tokenizer, (str, Path)):
        return json.loads(Path(tokenizer).read_text(encoding="utf-8"))
    if isinstance(tokenizer, Mapping):
        return dict(tokenizer)
    if hasattr(tokenizer, "to_str"):
        return json.loads(tokenizer.to_str())
    raise TypeError(f"expected a tokenizers.Tokenizer or a tokenizer.json path, got {tokenizer!r}")


def tokenizer_vocab(tokenizer: Any, vocab_size: int | None = None):
    """``(tokens, token_types, merges)`` for GGUF from a byte-level BPE tokenizer.

    Added special tokens become CONTROL tokens; if ``vocab_size`` is larger than the
    tokenizer, the rest is padded with UNUSED ``<pad_N>`` tokens."""
    doc = _tokenizer_json(tokenizer)
    model = doc.get("model") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"expected a BPE tokenizer, got {model.get('type')!r}")
    ids = dict(model["vocab"])
    special = set()
    for added in doc.get("added_tokens") or []:
        ids[added["content"]] = int(added["id"])
        if added.get("special", False):
            special.add(added["content"])
    n = max(ids.values()) + 1
    if sorted(ids.values()) != list(range(n)):
        raise ValueError("tokenizer ids are not contiguous from 0")
    size = n if vocab_size is None else int(vocab_size)
    if size < n:
        raise ValueError(f"model vocab_size {size} is smaller than the tokenizer's {n}")
    tokens = [""] * size
    for tok, i in ids.items():
        tokens[i] = tok
    types = [TOKEN_CONTROL if t in special else TOKEN_NORMAL for t in tokens[:n]]
    for i in range(n, size):
        tokens[i] = f"<pad_{i}>"
        types.append(TOKEN_UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    return tokens, types, merges


def write_llama_gguf(
    path: str | Path,
    config: LlamaConfig,
    tensors: Mapping[str, Any],
    tokenizer: Any,
    *,
    dtype: str = "f16",
    chat_template: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write ``tensors`` (Hugging Face ``LlamaForCausalLM`` names -> arrays or torch tensors)
    as a llama.cpp GGUF at ``path``; returns the path.

    ``tokenizer``: a byte-level BPE ``tokenizers.Tokenizer``, its JSON dict, or a
    ``tokenizer.json`` path. ``dtype``: ``"f16"`` or ``"f32"`` for the matrices. Without
    ``lm_head.weight`` the output layer is tied to the embeddings. ``chat_template``: a
    Jinja template stored as ``tokenizer.chat_template`` (used by chat completion).
    ``metadata``: extra string keys (e.g. ``rhythm.prompt_format``); quantizing keeps them."""
    import gguf  # the ml extra; imported here so the agent package imports without it

    if dtype not in ("f16", "f32"):
        raise ValueError(f"dtype must be 'f16' or 'f32', got {dtype!r}")
    if config.hidden_size % config.num_attention_heads:
        raise ValueError("hidden_size must be a multiple of num_attention_heads")
    tokens, types, merges = tokenizer_vocab(tokenizer, config.vocab_size)
    prepared = _prepare(config, tensors, dtype)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(config.name)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(float(config.rope_theta))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(
        gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32
    )

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    if config.bos_token_id is not None:
        writer.add_bos_token_id(int(config.bos_token_id))
    if config.eos_token_id is not None:
        writer.add_eos_token_id(int(config.eos_token_id))
    writer.add_add_bos_token(bool(config.add_bos_token))
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for key, value in (metadata or {}).items():
        writer.add_string(str(key), str(value))

    for name, data in prepared:
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _prepare(config: LlamaConfig, tensors: Mapping[str, Any], dtype: str):
    """``[(gguf name, array)]``: renamed, q/k permuted, cast; checks shapes and completeness."""
    out = []
    for hf_name, value in tensors.items():
        if _SKIPPED.fullmatch(hf_name):
            continue
        name = gguf_tensor_name(hf_name)
        data = _numpy(value)
        if hf_name.endswith("self_attn.q_proj.weight"):
            data = permute_qk(data, config.num_attention_heads)
        elif hf_name.endswith("self_attn.k_proj.weight"):
            data = permute_qk(data, config.n_kv_heads)
        if name == "token_embd.weight" and data.shape != (config.vocab_size, config.hidden_size):
            raise ValueError(
                f"embeddings have shape {data.shape}, expected "
                f"({config.vocab_size}, {config.hidden_size})"
            )
        if data.ndim == 1 or dtype == "f32":
            data = data.astype(np.float32)
        else:
            data = data.astype(np.float16)
        out.append((name, np.ascontiguousarray(data)))
    missing = _expected(config) - {name for name, _ in out}
    if missing:
        raise ValueError(f"missing tensors: {sorted(missing)[:5]}")
    return out


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().float().cpu().numpy()
    return np.asarray(value)


def _expected(config: LlamaConfig) -> set[str]:
    names = {"token_embd.weight", "output_norm.weight"}
    for i in range(config.num_hidden_layers):
        names.update(f"blk.{i}.{n}" for n in _LAYER_NAMES.values())
    return names


def with_metadata(src: str | Path, dst: str | Path, metadata: Mapping[str, str]) -> Path:
    """Copy the GGUF ``src`` to ``dst`` with the string keys ``metadata`` set (added, or
    replacing a key of that name); every other key and every tensor (quantized or not) is
    copied as stored, byte for byte. Returns ``dst``."""
    import gguf

    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise ValueError("with_metadata writes a new file: dst must not be src")
    reader = gguf.GGUFReader(str(src))
    arch_field = reader.fields.get(gguf.Keys.General.ARCHITECTURE)
    if arch_field is None:
        raise ValueError(f"{src} has no {gguf.Keys.General.ARCHITECTURE}")
    arch = bytes(arch_field.parts[-1]).decode()
    dst.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(dst), arch, endianess=reader.endianess)
    new = {str(k): str(v) for k, v in metadata.items()}
    for field in reader.fields.values():
        # the writer adds the architecture itself; GGUF.* are the reader's virtual fields
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name in new:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for key, value in new.items():
        writer.add_string(key, value)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return dst
