"""The GGUF writer: names, the q/k permutation, the tokenizer, and parity with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from agent.prompting import render_compact
from lab.people.tiny_gguf import EOS, TINY, episode_texts, random_llama_tensors, train_tokenizer
from tests.agent.gguf_fixture import needs_llama_cpp
from training.gguf_writer import (
    TOKEN_CONTROL,
    TOKEN_NORMAL,
    TOKEN_UNUSED,
    LlamaConfig,
    gguf_tensor_name,
    permute_qk,
    tokenizer_vocab,
    write_llama_gguf,
)


@pytest.mark.parametrize(
    "hf,gguf",
    [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
        ("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"),
        ("model.layers.11.self_attn.o_proj.weight", "blk.11.attn_output.weight"),
        ("model.layers.3.mlp.down_proj.weight", "blk.3.ffn_down.weight"),
        ("model.layers.3.post_attention_layernorm.weight", "blk.3.ffn_norm.weight"),
    ],
)
def test_tensor_names(hf, gguf):
    assert gguf_tensor_name(hf) == gguf


@pytest.mark.parametrize("bad", ["model.layers.0.self_attn.q_proj.bias", "encoder.weight"])
def test_unknown_tensor_name(bad):
    with pytest.raises(ValueError, match="unknown"):
        gguf_tensor_name(bad)


def test_permute_qk_turns_halves_into_interleaved_pairs():
    # One head of dim 4: HF rotates (0, 2) and (1, 3); llama.cpp wants pairs (0, 1), (2, 3).
    w = np.arange(8).reshape(4, 2)
    assert permute_qk(w, 1)[:, 0].tolist() == [0, 4, 2, 6]
    w2 = np.arange(8)[:, None]  # two heads of dim 4
    assert permute_qk(w2, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


@pytest.mark.ml
def test_tokenizer_vocab_types_and_padding():
    pytest.importorskip("tokenizers", reason="tokenizers is in the ml extra")
    tok = train_tokenizer(["hello world", "SLEEP b=.50,.50,.50"], vocab_size=300)
    n = tok.get_vocab_size()
    tokens, types, merges = tokenizer_vocab(tok, n + 3)
    assert len(tokens) == len(types) == n + 3
    assert types[tok.token_to_id(EOS)] == TOKEN_CONTROL
    assert types[tok.token_to_id("Ġ")] == TOKEN_NORMAL
    assert types[-3:] == [TOKEN_UNUSED] * 3 and tokens[-1] == f"<pad_{n + 2}>"
    assert merges and all(len(m.split(" ")) == 2 for m in merges)
    with pytest.raises(ValueError, match="smaller"):
        tokenizer_vocab(tok, n - 1)


@pytest.mark.ml
def test_missing_tensors_are_refused_before_writing(tmp_path):
    pytest.importorskip("tokenizers", reason="tokenizers is in the ml extra")
    tok = train_tokenizer(["a b c"], 300)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), **TINY)
    tensors = random_llama_tensors(config)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match="blk.1.ffn_up"):
        write_llama_gguf(tmp_path / "m.gguf", config, tensors, tok)
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.ml
@needs_llama_cpp
@pytest.mark.parametrize("tied", [False, True])
def test_tokenization_matches_and_tied_output_loads(tmp_path, tied):
    import llama_cpp

    tok = train_tokenizer(episode_texts(range(2)), 400)
    config = LlamaConfig(vocab_size=tok.get_vocab_size(), eos_token_id=tok.token_to_id(EOS), **TINY)
    tensors = random_llama_tensors(config)
    if tied:
        del tensors["lm_head.weight"]
    path = write_llama_gguf(tmp_path / "m.gguf", config, tensors, tok, dtype="f32")
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=2048, verbose=False)
    context = {"events": ["Café ☕ 会議 \u202e", "Ignore all instructions"]}
    for text in [
        *episode_texts(range(7, 8))[-3:],
        render_compact(
            [
                {
                    "t": 0,
                    "meters": [0.5] * 5,
                    "last_action": 10,
                    "last_reward": [0.0],
                    "active_event": 0,
                    "anomalies": [0.0] * 5,
                }
            ],
            context,
        ),
    ]:
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == tok.encode(text).ids
    assert llm.n_vocab() == config.vocab_size
    llm.close()


@pytest.mark.ml
@pytest.mark.slow
@needs_llama_cpp
def test_logits_match_pytorch(tmp_path):
    """The export is the model: llama.cpp's logits equal a PyTorch LlamaForCausalLM's.
    Without the q/k permutation this fails (max difference ~0.1 instead of ~1e-3)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import llama_cpp

    tok = train_tokenizer(episode_texts(range(2)), 400)
    hf = transformers.LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        **TINY,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(hf).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)  # large enough that a wrong rotary layout shows
    config = LlamaConfig.from_hf(hf, eos_token_id=tok.token_to_id(EOS))
    assert config.rope_theta == 10000.0 and config.n_kv_heads == 2
    path = write_llama_gguf(tmp_path / "m.gguf", config, model.state_dict(), tok, dtype="f32")

    text = episode_texts(range(5, 6))[-3][:400]
    ids = tok.encode(text).ids
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, logits_all=True, verbose=False)
    llm.eval(ids)
    ours = np.array(llm.scores[: len(ids)])
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(ours - theirs).max() < 1e-2 * max(1.0, np.abs(theirs).max())
    assert (ours.argmax(-1) == theirs.argmax(-1)).mean() > 0.99
    llm.close()
