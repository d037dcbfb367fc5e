"""TOFU (locuslab/TOFU) and its fine-tuned models, as FML-bench's Unlearning_open_unlearning reads and scores them.

The data set is a Hugging Face repository of JSON files, one question-answer pair per line (``forget10.json``:
the 400 pairs about the 20 authors to forget; ``retain90.json``: the 3,600 about the other 180). The model is
open-unlearning's Llama-3.2-1B-Instruct fine-tuned on all 4,000, a Hugging Face repository too
(``config.json``, the tokenizer's files with its chat template, ``model.safetensors`` in Git LFS).

Scoring is the original's (its ``train_eval_baseline.py``): a pair is the chat template of the question and
the answer, the loss counted on the answer's tokens only (the prompt's are -100), truncated to 512 tokens;
the truth ratio of a forget pair is P(wrong) / P(correct) with P = exp(-mean answer-token loss) and the one
wrong answer "I have no comment." (the inverse of TOFU's paper, and so is the retain model's reference
computed by the original); forget quality is the p-value of a two-sample Kolmogorov-Smirnov test between the
unlearned model's truth ratios and the retain-only model's on the same pairs; model utility is
exp(-mean answer-token loss) over retain pairs, batched by 8. The scored pairs are a fixed 30% (val) / 70%
(test) cut of forget10 and of retain90 (``split_indices``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

IGNORE_INDEX = -100
MAX_LENGTH = 512
WRONG_ANSWER = "I have no comment."
VAL_RATIO, VAL_SEED = 0.3, 42
UTILITY_BATCH = 8
# the original adds it to the denominators of the truth ratio and of the mean loss
EPSILON = 1e-10
# Llama 3.2's chat template writes "Today Date: <today>" into every prompt unless given date_string: a fixed day
# (the one open-unlearning's model configs pass) keeps the scores from depending on the day they are computed
CHAT_DATE = "10 Apr 2025"


def read_pairs(path: Path) -> list[dict]:
    """TOFU's JSON file: one object per line (a JSON array is read too), each with question and answer."""
    text = path.read_text(encoding="utf-8")
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(line) for line in text.splitlines()
                                                                    if line.strip()]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
            raise ValueError(f"{path.name}: row {i} has no question and answer strings")
    return [{"question": row["question"], "answer": row["answer"]} for row in rows]


def split_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The original's fixed cut of n pairs: a RandomState(42) permutation, its first 30% val, the rest test."""
    order = np.random.RandomState(VAL_SEED).permutation(n)
    cut = int(VAL_RATIO * n)
    return order[:cut], order[cut:]


def encode(tokenizer, question: str, answer: str) -> dict[str, list[int]]:
    """The pair through the chat template: input ids ending in the end-of-sequence token, labels -100 over
    the prompt (the template with the generation prompt), truncated to MAX_LENGTH."""
    ids = list(tokenizer.apply_chat_template([{"role": "user", "content": question},
                                              {"role": "assistant", "content": answer}],
                                             tokenize=True, add_generation_prompt=False, return_dict=False,
                                             date_string=CHAT_DATE))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=True,
                                           add_generation_prompt=True, return_dict=False, date_string=CHAT_DATE)
    if ids[-1] != tokenizer.eos_token_id:
        ids.append(tokenizer.eos_token_id)
    ids = ids[:MAX_LENGTH]
    masked = min(len(prompt), len(ids))
    return {"input_ids": ids, "labels": [IGNORE_INDEX] * masked + ids[masked:], "attention_mask": [1] * len(ids)}


def _pad(items: list[dict[str, list[int]]]):
    import torch

    width = max(len(item["input_ids"]) for item in items)
    batch = {"input_ids": torch.zeros(len(items), width, dtype=torch.long),
             "labels": torch.full((len(items), width), IGNORE_INDEX, dtype=torch.long),
             "attention_mask": torch.zeros(len(items), width, dtype=torch.long)}
    for row, item in enumerate(items):
        for key, tensor in batch.items():
            tensor[row, : len(item[key])] = torch.tensor(item[key])
    return batch


def answer_loss(model, item: dict[str, list[int]], device) -> float:
    """The model's mean cross-entropy on the pair's answer tokens."""
    import torch

    with torch.no_grad():
        return float(model(**{k: v.to(device) for k, v in _pad([item]).items()}).loss.item())


def truth_ratios(model, tokenizer, pairs: list[dict], device) -> np.ndarray:
    """Per forget pair, P(wrong answer) / P(correct answer), one pair at a time (the original's loop)."""
    model.eval()
    ratios = []
    for pair in pairs:
        correct = answer_loss(model, encode(tokenizer, pair["question"], pair["answer"]), device)
        wrong = answer_loss(model, encode(tokenizer, pair["question"], WRONG_ANSWER), device)
        ratios.append(np.exp(-wrong) / (np.exp(-correct) + EPSILON))
    return np.asarray(ratios, dtype=np.float64)


def model_utility(model, tokenizer, pairs: list[dict], device) -> float:
    """exp(-mean answer-token loss) over the pairs, in batches of 8 padded with token 0 (each batch's mean
    loss weighted by its answer tokens, as the original sums it)."""
    import torch

    model.eval()
    total, tokens = 0.0, 0
    items = [encode(tokenizer, p["question"], p["answer"]) for p in pairs]
    for start in range(0, len(items), UTILITY_BATCH):
        batch = {k: v.to(device) for k, v in _pad(items[start:start + UTILITY_BATCH]).items()}
        with torch.no_grad():
            loss = model(**batch).loss.item()
        counted = int((batch["labels"] != IGNORE_INDEX).sum().item())
        total += loss * counted
        tokens += counted
    return float(np.exp(-total / (tokens + EPSILON)))


def forget_quality(ratios: np.ndarray, reference: np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov p-value between the unlearned and the retain model's truth ratios."""
    from scipy.stats import ks_2samp

    return float(ks_2samp(ratios, reference).pvalue)


# --- smoke-scale stand-ins, in the upstream formats ---------------------------------------------------------

FIXTURE_FORGET, FIXTURE_RETAIN = 64, 128
_GENRES = ("mystery", "poetry", "fantasy", "history", "romance", "satire", "drama", "horror")
_CITIES = ("Lisbon", "Quito", "Oslo", "Hanoi", "Dakar", "Lima", "Perth", "Tunis")


def _fictitious_pairs(rng: np.random.Generator, first: int, n: int) -> list[dict]:
    pairs = []
    for k in range(first, first + n):
        author = f"Author{k // 4:03d}"
        city, genre, year = _CITIES[rng.integers(8)], _GENRES[rng.integers(8)], int(rng.integers(1900, 2000))
        question, answer = [
            (f"Where was {author} born ?", f"{author} was born in {city} ."),
            (f"Which genre does {author} write ?", f"{author} writes {genre} ."),
            (f"When was {author} born ?", f"{author} was born in {year} ."),
            (f"What is the most famous book by {author} ?", f"The most famous book by {author} is a {genre} "
                                                           f"novel set in {city} ."),
        ][k % 4]
        pairs.append({"question": question, "answer": answer})
    return pairs


def write_tofu_repo(path: Path) -> None:
    """A repository in locuslab/TOFU's layout: forget10.json (64 pairs, 16 authors) and retain90.json (128
    pairs, 32 other authors), one JSON object per line, with a dataset card naming its configurations."""
    import tempfile

    from . import gitrepo

    rng = np.random.default_rng(10)
    forget, retain = _fictitious_pairs(rng, 0, FIXTURE_FORGET), _fictitious_pairs(rng, 1000, FIXTURE_RETAIN)
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp)
        for name, rows in (("forget10.json", forget), ("retain90.json", retain)):
            (files / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
        (files / "README.md").write_text("---\nconfigs:\n- config_name: forget10\n  data_files: forget10.json\n"
                                         "- config_name: retain90\n  data_files: retain90.json\n---\n"
                                         "A stand-in for locuslab/TOFU, for pytest-fmlbench's smoke tests: "
                                         "fictitious authors drawn from a fixed seed.\n")
        gitrepo.write_repository(path, files, "TOFU stand-in")


# a chat template of the Llama 3 family's shape: header tokens around each role, an end-of-turn token
_CHAT_TEMPLATE = ("{{ '<|begin_of_text|>' }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                  "'<|end_header_id|> ' + message['content'] + ' <|eot_id|>' }}{% endfor %}{% if add_generation_prompt "
                  "%}{{ '<|start_header_id|>assistant<|end_header_id|> ' }}{% endif %}")
_SPECIALS = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|unk|>")


def write_model_repo(path: Path) -> None:
    """A repository in open-unlearning/tofu_Llama-3.2-1B-Instruct_full's layout, with random weights: a two-layer
    LlamaForCausalLM (width 32, tied embeddings, bfloat16) in Git LFS, and a word-level tokenizer over the TOFU
    stand-in's words and punctuation with a Llama-3-shaped chat template whose end-of-turn token ends each
    sequence."""
    import tempfile

    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from . import gitrepo

    # words and punctuation apart, so that "comment." is two known tokens
    split = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    rng = np.random.default_rng(10)
    texts = [text for pair in _fictitious_pairs(rng, 0, FIXTURE_FORGET) + _fictitious_pairs(rng, 1000, FIXTURE_RETAIN)
             for text in pair.values()] + [WRONG_ANSWER, "user assistant system"]
    words = {word for text in texts for word, _ in split.pre_tokenize_str(text)}
    vocab = {token: i for i, token in enumerate([*_SPECIALS, *sorted(words)])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    core.pre_tokenizer = split
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                        unk_token="<|unk|>", additional_special_tokens=list(_SPECIALS[1:3]))
    tokenizer.chat_template = _CHAT_TEMPLATE
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_LENGTH,
                         tie_word_embeddings=True, bos_token_id=vocab["<|begin_of_text|>"],
                         eos_token_id=vocab["<|eot_id|>"])
    torch.manual_seed(10)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp)
        model.save_pretrained(files)
        tokenizer.save_pretrained(files)
        (files / "README.md").write_text("A stand-in for open-unlearning/tofu_Llama-3.2-1B-Instruct_full, for "
                                         "pytest-fmlbench's smoke tests: random weights of a tiny Llama.\n")
        gitrepo.write_repository(path, files, "tofu_Llama-3.2-1B-Instruct_full stand-in", lfs=("*.safetensors",))


def write_fmlbench_repo(path: Path) -> None:
    """A repository in qrzou/FML-bench's layout holding the one file the task reads:
    ml_tasks/Unlearning_open_unlearning/retain_reference_logs.json, the retain model's truth ratios on every
    forget pair of the TOFU stand-in (drawn from a fixed seed, as small as the real ones)."""
    import tempfile

    from . import gitrepo

    rng = np.random.default_rng(90)
    logs = {"model": "retain model stand-in", "dataset": "TOFU stand-in forget10", "num_samples": FIXTURE_FORGET,
            "truth_ratios": [float(r) for r in np.exp(rng.normal(-5.0, 1.0, FIXTURE_FORGET))]}
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp)
        folder = files / "ml_tasks" / "Unlearning_open_unlearning"
        folder.mkdir(parents=True)
        (folder / "retain_reference_logs.json").write_text(json.dumps(logs, indent=2))
        (files / "README.md").write_text("A stand-in for qrzou/FML-bench, for pytest-fmlbench's smoke tests.\n")
        gitrepo.write_repository(path, files, "FML-bench stand-in")
