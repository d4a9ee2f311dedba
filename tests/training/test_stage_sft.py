"""Stage 3, supervised fine-tuning (training.sft, training.batches): hidden-belief layout,
masked and weighted losses, the belief head, curriculum cuts, batch shapes, --focus."""

from __future__ import annotations

import numpy as np
import pytest

from agent.prompting import format_output
from simulator import spec


@pytest.mark.ml
def test_hidden_belief_layout_positions_and_mask():
    from training.batches import hidden_belief_layout

    # tokens: a a [1 1] c c [2] d  (two belief spans)
    hide = np.array([[0, 0, 1, 1, 0, 0, 2, 0]])
    pos, allowed = hidden_belief_layout(hide)
    assert pos[0].tolist() == [0, 1, 2, 3, 2, 3, 4, 4]
    a = allowed[0, 0].numpy()
    assert a.shape == (8, 8) and not a[np.triu_indices(8, 1)].any()  # causal
    assert a[3, 2] and not a[4, 2] and not a[4, 3] and not a[7, 6] and a[6, 6]
    assert a[7].tolist() == [True, True, False, False, True, True, False, True]
    no_spans, plain = hidden_belief_layout(np.zeros((2, 5), dtype=int))
    assert no_spans.tolist() == [list(range(5))] * 2 and plain[:, 0].numpy().sum() == 2 * 15


@pytest.mark.ml
def test_correction_weight_scales_the_loss_of_corrected_beliefs():
    import torch

    from training.batches import masked_loss
    from training.sft import Args, build_model
    from training.tokens import CORRECTION

    torch.manual_seed(0)
    model = build_model(Args(layers=1, hidden=32, ffn=64, heads=2, kv_heads=2), 50, 0)
    ids = torch.randint(1, 50, (2, 12))
    mask = torch.zeros(2, 12, dtype=torch.long)
    mask[:, 3:6] = 1
    mask[:, 8:10] = CORRECTION
    plain, n = masked_loss(model, ids, mask)
    same, _ = masked_loss(model, ids, mask, correction_weight=1.0)
    heavy, _ = masked_loss(model, ids, mask, correction_weight=3.0)
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
        per = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[:, 1:], reduction="none"
        )
        m = mask[:, 1:]
        w = (m > 0).float() * torch.where(m == CORRECTION, 3.0, 1.0)
        want = (per * w).sum() / w.sum()
        want_plain = per[m > 0].mean()
    assert n == 10
    assert torch.isclose(plain, want_plain, atol=1e-5) and torch.equal(plain, same)
    assert torch.isclose(heavy, want, atol=1e-5) and not torch.isclose(heavy, plain)


@pytest.mark.ml
def test_aux_loss_is_the_squared_error_of_the_belief_head():
    import torch

    from training.sft import aux_loss

    torch.manual_seed(0)
    head = torch.nn.Linear(4, 3)
    hidden = torch.randn(1, 3, 4)
    targets = torch.tensor([[[0.2, 0.4, 0.6], [float("nan")] * 3, [0.9, 0.1, 0.5]]])
    got = aux_loss(head, hidden, targets)
    pred = head(hidden[0, [0, 2]]).sigmoid()
    assert torch.isclose(got, ((pred - targets[0, [0, 2]]) ** 2).mean())
    assert aux_loss(head, hidden, torch.full((1, 3, 3), float("nan"))) == 0


@pytest.mark.ml
def test_masked_loss_predicts_the_labels_not_the_blinded_input():
    import torch

    from training.batches import masked_loss
    from training.sft import Args, build_model

    torch.manual_seed(0)
    model = build_model(Args(layers=1, hidden=32, ffn=64, heads=2, kv_heads=2), 50, 0)
    labels = torch.randint(1, 50, (1, 12))
    mask = torch.zeros(1, 12, dtype=torch.long)
    mask[:, 4:8] = 1
    ids = labels.clone()
    ids[0, 5] = (labels[0, 5] + 1) % 50
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1]
        per = torch.nn.functional.cross_entropy(logits, labels[0, 1:], reduction="none")
        want = per[3:7].mean()
        got, n = masked_loss(model, ids, mask, labels=labels)
        plain, _ = masked_loss(model, ids, mask)
    assert n == 4 and torch.isclose(got, want, atol=1e-5) and not torch.isclose(got, plain)


@pytest.mark.ml
def test_curriculum_cuts_keep_the_first_k_steps_and_only_their_answers(records, with_beliefs):
    from training.batches import batch_tensors, bucketed
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.sft import prefix_lengths

    rng = np.random.default_rng(6)
    recs = [with_beliefs(r, rng) for r in records[:2]]
    texts = [episode_text(r) for r in recs]
    tok = train_tokenizer(texts, 600)
    enc = [encode_episode(tok, t) for t in texts]
    n = max(len(e[0]) for e in enc)
    split = {
        "ids": np.zeros((2, n), dtype=np.int32),
        "mask": np.zeros((2, n), dtype=np.uint8),
        "lengths": np.array([len(e[0]) for e in enc], dtype=np.int32),
    }
    for r, (i, m, _) in enumerate(enc):
        split["ids"][r, : len(i)], split["mask"][r, : len(m)] = i, m
    cuts = prefix_lengths(split, tok)
    assert np.array_equal(cuts[:, -1], split["lengths"])
    assert np.all(np.diff(cuts[:, 1:], axis=1) > 0)
    for k in (1, 5, 27):
        text = tok.decode(split["ids"][0, : cuts[0, k]].tolist())
        lines = [ln for ln in text.splitlines() if ln.split(":", 1)[0] in spec.SLOTS]
        assert len(lines) == k and lines[-1].endswith(text.splitlines()[-1])
        assert lines[-1].split(":", 1)[1].startswith(spec.ACTIONS[recs[0]["actions"][k - 1]])
    ids, mask, _ = batch_tensors(split, np.array([0, 1]), cuts[:, 5])
    assert ids.shape[1] == bucketed(int(cuts[:, 5].max()), n) >= cuts[:, 5].max()
    for r in range(2):
        answers = tok.decode(ids[r][mask[r] > 0].tolist())
        want = "".join(
            format_output(a, b)
            for a, b in zip(recs[r]["actions"][:5], recs[r]["beliefs"][:5], strict=True)
        )
        assert answers == want


@pytest.mark.ml
def test_batches_are_cut_to_a_few_shapes_and_keep_every_target():
    """A batch is cut to its longest week rounded up to LENGTH_BUCKET (few shapes for the CPU
    kernels' caches), never past the array, and the padding carries no target."""
    from training.batches import LENGTH_BUCKET, batch_tensors

    rng = np.random.default_rng(3)
    width = 7 * LENGTH_BUCKET + 5
    lengths = rng.integers(20, width + 1, size=40).astype(np.int32)
    lengths[0] = width
    split = {"ids": np.zeros((40, width), np.int32), "mask": np.zeros((40, width), np.uint8), "lengths": lengths}
    for r, n in enumerate(lengths):
        split["ids"][r, :n] = rng.integers(1, 100, size=n)
        split["mask"][r, :n] = rng.random(n) < 0.3
    shapes = set()
    for _ in range(200):
        idx = np.sort(rng.choice(40, size=4, replace=False))
        ids, mask, _ = batch_tensors(split, idx)
        longest = int(lengths[idx].max())
        assert longest <= ids.shape[1] < longest + LENGTH_BUCKET
        assert ids.shape[1] % LENGTH_BUCKET == 0 or ids.shape[1] == width
        assert int(mask.sum()) == int(split["mask"][idx].sum())
        assert np.array_equal(ids.numpy()[:, :longest], split["ids"][idx, :longest])
        shapes.add(ids.shape[1])
    assert len(shapes) <= width // LENGTH_BUCKET + 1


@pytest.mark.ml
def test_action_errors_count_each_weeks_wrong_actions_and_focus_draws_only_those(records, tmp_path, with_beliefs):
    """Per week, the actions a model gets wrong teacher-forced (what SFT's --focus draws
    from) match a step-by-step count on the week's own prompt tokens, and add up to the
    validation action accuracy; --focus keeps only the weeks with an error, weighted by
    their number."""
    import torch

    from training.batches import action_errors, evaluate_split, forward_hidden
    from training.dataset import encode_episode, episode_text, train_tokenizer
    from training.sft import Args, build_model, hard_weeks
    from training.tokens import EOS

    rng = np.random.default_rng(5)
    recs = [with_beliefs(r, rng) for r in records]
    tok = train_tokenizer([episode_text(r) for r in recs], 600)
    encoded = [encode_episode(tok, episode_text(r)) for r in recs]
    width = max(len(e[0]) for e in encoded)

    def padded(k):
        return np.stack([np.pad(e[k], (0, width - len(e[k]))) for e in encoded])

    split = {
        "ids": padded(0),
        "mask": padded(1),
        "hide": padded(2),
        "lengths": np.array([len(e[0]) for e in encoded]),
    }
    torch.manual_seed(2)
    model = build_model(
        Args(layers=2, hidden=64, ffn=128, heads=2, kv_heads=2),
        tok.get_vocab_size(),
        tok.token_to_id(EOS),
    ).eval()
    expected = []
    with torch.no_grad():
        for ids, mask, hide in encoded:
            x = torch.tensor(ids[None]).long()
            logits = model.lm_head(forward_hidden(model, x, torch.tensor(hide[None])))[0]
            starts = [i for i in range(1, len(mask)) if mask[i] and not mask[i - 1]]
            expected.append(sum(int(logits[s - 1].argmax()) != int(ids[s]) for s in starts))
    assert len(starts) == spec.EPISODE_STEPS
    errors = action_errors(model, split, np.array([2, 0, 1]), 2, bf16=False)
    assert errors.tolist() == [expected[2], expected[0], expected[1]]
    assert sum(expected) > 0  # an untrained model errs, so the count is not vacuous
    acc = evaluate_split(model, split, 2, bf16=False)["val_action_acc"]
    assert acc == pytest.approx(1 - sum(expected) / (3 * spec.EPISODE_STEPS))

    args = Args(focus=0.5, focus_weeks=0, init_from="x", batch_size=2, bf16=False)
    weeks, p = hard_weeks(model, split, args, np.random.default_rng(0), lambda *a: None)
    hard = [w for w in range(3) if expected[w]]
    assert weeks.tolist() == hard
    assert p.tolist() == pytest.approx([expected[w] / sum(expected) for w in hard])
    none, _ = hard_weeks(model, split, Args(), np.random.default_rng(0), lambda *a: None)
    assert len(none) == 0
    with pytest.raises(ValueError, match="init-from"):
        hard_weeks(model, split, Args(focus=0.5), np.random.default_rng(0), lambda *a: None)

    from training import sft

    data = tmp_path / "data"
    data.mkdir()
    for name in ("train", "val"):
        np.savez(data / f"{name}.npz", **split)
    tok.save(str(data / "tokenizer.json"))
    model.save_pretrained(tmp_path / "init")
    run = Args(data=str(data), out=str(tmp_path / "sft"), init_from=str(tmp_path / "init"))
    run.focus, run.focus_weeks, run.batch_size, run.steps, run.eval_every = 0.5, 0, 2, 3, 3
    ck = sft.main(run)
    rows = (tmp_path / "sft" / "loss.csv").read_text().splitlines()[1:]
    assert len(rows) == 3 and (ck / "model.safetensors").exists()
