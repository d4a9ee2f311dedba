"""A tiny random-weight Llama GGUF with a BPE tokenizer trained on our prompts (tests, benchmarks).

Nothing is downloaded: the tokenizer is trained here with ``tokenizers`` on rendered
simulator episodes (compact and chat form) and output lines; the weights are random
(numpy, seeded); :func:`training.gguf_writer.write_llama_gguf` writes the file. The model's
answers are nonsense, which is the point: the grammar alone must make them valid.

Needs the ml extra (``tokenizers``, ``gguf``); the tests reach it through the fixtures of
``tests/agent/gguf_fixture.py`` (``tiny_gguf``, ``needs_llama_cpp``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agent.prompting import format_output, render_chat, render_compact
from simulator import spec
from simulator.env import RhythmEnv
from simulator.policies import RandomPolicy
from training.dataset import train_tokenizer  # the pipeline's own byte-level BPE
from training.gguf_writer import LlamaConfig, write_llama_gguf
from training.tokens import EOS

#: A minimal chat template (role lines), so chat completion works without llama-cpp-python's
#: fallback format.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}<|assistant|>\n"
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def episode_texts(seeds=range(4), context=None) -> list[str]:
    """Compact and chat renderings of whole random-policy episodes, with output lines."""
    texts = []
    rng = np.random.default_rng(0)
    env = RhythmEnv()
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        policy = RandomPolicy()
        policy.reset(seed)
        history, beliefs = [obs], []
        for _ in range(spec.EPISODE_STEPS):
            a, _ = policy.act(obs)
            b = tuple(np.round(rng.uniform(0, 1, 3), 2))
            texts.append(format_output(a, b))
            obs, *_ = env.step({"action": a, "belief": b})
            history.append(obs)
            beliefs.append(b)
        texts.append(render_compact(history, context, beliefs))
        texts.extend(m["content"] for m in render_chat(history[:10], context, beliefs[:9]))
    return texts


def random_llama_tensors(config: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Hugging Face-named random weights (N(0, 0.02) matrices, unit norms)."""
    rng = np.random.default_rng(seed)
    h, f, v = config.hidden_size, config.intermediate_size, config.vocab_size
    kv = config.n_kv_heads * config.head_dim

    def mat(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, (rows, cols)).astype(np.float32)

    t = {
        "model.embed_tokens.weight": mat(v, h),
        "model.norm.weight": np.ones(h, np.float32),
        "lm_head.weight": mat(v, h),
    }
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "self_attn.q_proj.weight"] = mat(h, h)
        t[p + "self_attn.k_proj.weight"] = mat(kv, h)
        t[p + "self_attn.v_proj.weight"] = mat(kv, h)
        t[p + "self_attn.o_proj.weight"] = mat(h, h)
        t[p + "mlp.gate_proj.weight"] = mat(f, h)
        t[p + "mlp.up_proj.weight"] = mat(f, h)
        t[p + "mlp.down_proj.weight"] = mat(h, f)
    return t


def build_tiny_gguf(
    path: str | Path,
    *,
    seed: int = 0,
    dtype: str = "f16",
    n_ctx: int = 2048,
    vocab_size: int = 512,
    metadata: dict[str, str] | None = None,
):
    """Write a 2-layer, 64-wide random Llama GGUF at ``path``; returns ``(path, tokenizer)``."""
    tok = train_tokenizer(episode_texts(), vocab_size)
    eos = tok.token_to_id(EOS)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        max_position_embeddings=n_ctx,
        bos_token_id=eos,
        eos_token_id=eos,
        add_bos_token=False,
        name="rhythm-tiny-random",
        **TINY,
    )
    write_llama_gguf(
        path,
        config,
        random_llama_tensors(config, seed),
        tok,
        dtype=dtype,
        chat_template=CHAT_TEMPLATE,
        metadata=metadata,
    )
    return Path(path), tok
