"""unlearning_open_unlearning_full: FML-bench's Unlearning_open_unlearning spec and protocol (its split, truth
ratios, forget quality and model utility), Hugging Face repositories pinned at published revisions with their LFS
objects checked, the smoke run offline, the retain model's truth ratios out of agent code's reach, one-line
preflight, fetch failing closed."""

import hashlib
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.taskkit import tofu

from full_support import (Attack, FullTask, assert_fetch_fails_closed, assert_matches_original,
                          assert_missing_data_is_one_line, assert_the_shared_attack_reached_nothing,
                          assert_the_smoke_run_passed, attack_payload, data_root, fmlbench, needs_bwrap,
                          shared_smoke_attack_run)

TASK = FullTask("unlearning_open_unlearning")
SPEC = TASK.spec
HARNESS, WORKSPACE = TASK.folder / "harness", TASK.folder / "workspace"

# the revisions this task pins, each found published (task.yaml says where); FML-bench pins open-unlearning by 4ad738a
PINNED = {"tofu": ("https://huggingface.co/datasets/locuslab/TOFU", "324592d84ae4f482ac7249b9285c2ecdb53e3a68", True),
          "tofu-llama-3.2-1b-instruct-full": ("https://huggingface.co/open-unlearning/tofu_Llama-3.2-1B-Instruct_full",
                                              "88e31200b97e4c0c04ae0d2f0b591f427046d192", True),
          "fml-bench": ("https://github.com/qrzou/FML-bench.git", "d336651ebea50c622c256f02ded82b68b4451fdc", False),
          "open-unlearning": ("https://github.com/locuslab/open-unlearning.git",
                              "4ad738aaf60f6a4385f6e2506d01da99e76c31f3", False)}

# Runs when train.py imports algorithm.py, in every val and test run: it looks for FML-bench's retain-model logs, TOFU
# and the model in the cache, the scored pairs with their reference truth ratios, and the cache's stamps.
ATTACK = Attack("algorithm.py", "import torch", attack_payload(
    cache=("smoke/fml-bench/src/ml_tasks/Unlearning_open_unlearning/retain_reference_logs.json", "smoke/tofu/src",
           "smoke/tofu-llama-3.2-1b-instruct-full/src"),
    private=("val_scored.json", "test_scored.json", "architecture"),
    secrets=("retain_reference_logs.json", "val_scored.json", "test_scored.json", "stamp.json")))
shared_run = shared_smoke_attack_run(TASK, ATTACK)


def test_the_spec_is_the_originals():
    assert_matches_original(SPEC)
    assert tuple(SPEC.editable) == builtin_tasks()[SPEC.original.task].target_files == ("algorithm.py",)
    assert SPEC.constraints == [] and SPEC.original.pinned_commit.startswith("4ad738a")  # the original's config.json
    assert {a.name: (a.urls[0], a.commit, a.lfs) for a in SPEC.data} == PINNED
    assert all(a.kind == "git" and not a.gated for a in SPEC.data)
    (copy,) = SPEC.upstream  # open-unlearning's checkout is the original's workspace: its code, to read
    assert copy.artifact == "open-unlearning" and copy.paths == ["src", "configs", "docs"]
    assert {"src/**", "configs/**", "docs/**", "train.py", "data/**"} <= set(SPEC.protected)


def test_the_baseline_is_the_originals_gradient_ascent():
    import torch

    sys.path.insert(0, str(WORKSPACE))
    try:
        import algorithm
    finally:
        sys.path.remove(str(WORKSPACE))
        sys.modules.pop("algorithm", None)
    assert algorithm.get_unlearning_config() == {
        "method": "grad_ascent", "epochs": 10, "lr": 1e-5, "batch_size": 8, "gradient_accumulation_steps": 4,
        "weight_decay": 0.01, "warmup_ratio": 0.1, "retain_loss_weight": 0.0, "max_grad_norm": 1.0}

    class LanguageModel:
        def __call__(self, input_ids, attention_mask, labels):
            return type("Output", (), {"loss": torch.tensor(float(input_ids.sum()))})()

    forget = {k: torch.full((2, 3), 2) for k in ("input_ids", "attention_mask", "labels")}
    retain = {k: torch.full((2, 3), 5) for k in ("input_ids", "attention_mask", "labels")}
    assert float(algorithm.compute_unlearn_loss(LanguageModel(), forget, retain)) == -12.0  # the retain side unused


def test_the_scored_cut_is_the_originals():
    # the original's split_indices: RandomState(42).permutation(n), the first int(0.3 n) val, the rest test
    for n, (n_val, n_test) in ((400, (120, 280)), (3600, (1080, 2520))):
        val, test = tofu.split_indices(n)
        order = np.random.RandomState(42).permutation(n)
        assert (len(val), len(test)) == (n_val, n_test)
        assert val.tolist() == order[:n_val].tolist() and test.tolist() == order[n_val:].tolist()


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """The smoke fixtures' model and TOFU pairs, and the model loaded."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("stand_in")
    tofu.write_model_repo(root / "model")
    tofu.write_tofu_repo(root / "tofu")
    return {"root": root, "tokenizer": AutoTokenizer.from_pretrained(root / "model"),
            "model": AutoModelForCausalLM.from_pretrained(root / "model", dtype=torch.bfloat16).eval(),
            "forget": tofu.read_pairs(root / "tofu" / "forget10.json"),
            "retain": tofu.read_pairs(root / "tofu" / "retain90.json")}


def test_the_experiment_and_the_evaluator_encode_a_pair_alike(stand_in):
    """train.py (workspace code, which imports nothing of the harness) and taskkit.tofu each encode pairs as the
    original does: the chat template, the end-of-sequence token, the loss on the answer's tokens only."""
    sys.path.insert(0, str(WORKSPACE))
    try:
        import train
    finally:
        sys.path.remove(str(WORKSPACE))
        sys.modules.pop("train", None)
        sys.modules.pop("algorithm", None)
    tokenizer = stand_in["tokenizer"]
    for pair in stand_in["forget"][:8] + [{"question": "Where was Author000 born ?", "answer": tofu.WRONG_ANSWER}]:
        ours = tofu.encode(tokenizer, pair["question"], pair["answer"])
        theirs = {k: v.tolist() for k, v in train.encode(tokenizer, pair["question"], pair["answer"]).items()}
        assert ours == theirs
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": pair["question"]}], tokenize=True,
                                               add_generation_prompt=True, return_dict=False)
        answer = ours["input_ids"][len(prompt):]
        assert ours["labels"] == [-100] * len(prompt) + answer and answer[-1] == tokenizer.eos_token_id
        assert "".join(tokenizer.decode(answer[:-1]).split()) == "".join(pair["answer"].split())
        assert tokenizer.unk_token_id not in ours["input_ids"]


def test_truth_ratios_forget_quality_and_utility_are_the_originals(stand_in):
    import torch
    from scipy.stats import ks_2samp

    model, tokenizer, pairs = stand_in["model"], stand_in["tokenizer"], stand_in["forget"][:6]

    def loss(question, answer):
        item = tofu.encode(tokenizer, question, answer)
        with torch.no_grad():
            return model(**{k: torch.tensor([v]) for k, v in item.items()}).loss.item()

    expected = [np.exp(-loss(p["question"], "I have no comment.")) / (np.exp(-loss(p["question"], p["answer"])) + 1e-10)
                for p in pairs]
    assert tofu.truth_ratios(model, tokenizer, pairs, "cpu") == pytest.approx(expected, rel=1e-6)
    reference = np.linspace(0.1, 2.0, 11)
    assert tofu.forget_quality(np.asarray(expected), reference) == ks_2samp(expected, reference).pvalue
    # utility: the answer tokens' mean loss over all pairs (each batch's mean weighted by its answer tokens)
    retain = stand_in["retain"][:11]  # a batch of 8 and one of 3
    losses = [loss(p["question"], p["answer"]) for p in retain]
    counts = [sum(label != -100 for label in tofu.encode(tokenizer, p["question"], p["answer"])["labels"]) for p in retain]
    assert tofu.model_utility(model, tokenizer, retain, "cpu") == pytest.approx(
        np.exp(-np.dot(losses, counts) / sum(counts)), rel=1e-2)  # bfloat16: padding changes the rounding


@pytest.fixture(scope="module")
def smoke_cache(shared_run):
    """The task's smoke fixtures as ``fmlbench data fixtures`` wrote them for the module's smoke run: its data
    cache's smoke folder, which prepare.py only reads (not a second set written alike)."""
    return shared_run.data_root / "smoke"


def run_evaluate(tmp_path, cache, weights: bytes | None) -> subprocess.CompletedProcess:
    """prepare.py (val) on the smoke fixtures, then evaluate.py on OUT holding ``weights`` as model.safetensors."""
    workspace, private, out = tmp_path / "workspace", tmp_path / "private", tmp_path / "out"
    out.mkdir(parents=True)
    common = ["--split", "val", "--workspace", str(workspace), "--private", str(private), "--out", str(out)]
    done = subprocess.run([sys.executable, str(HARNESS / "prepare.py"), *common, "--data", str(cache)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if weights is not None:
        (out / "model.safetensors").write_bytes(weights)
    return subprocess.run([sys.executable, str(HARNESS / "evaluate.py"), *common, "--result", str(tmp_path / "r.json")],
                          capture_output=True, text=True)


def test_prepare_keeps_the_reference_ratios_private_and_the_evaluator_scores_the_fine_tuned_weights(tmp_path,
                                                                                                    smoke_cache):
    model = smoke_cache / "tofu-llama-3.2-1b-instruct-full" / "src" / "model.safetensors"
    done = run_evaluate(tmp_path, smoke_cache, None)
    assert done.returncode == 1 and done.stderr.strip() == "evaluate.py: no model: model.safetensors is missing"
    workspace = tmp_path / "workspace" / "data"
    assert sorted(p.name for p in workspace.iterdir()) == ["forget10.json", "model", "retain90.json"]
    assert (workspace / "model" / "model.safetensors").read_bytes() == model.read_bytes()
    assert not any("truth_ratio" in p.read_text(errors="ignore") for p in workspace.rglob("*.json"))
    scored = json.loads((tmp_path / "private" / "val_scored.json").read_text())
    logs = json.loads((smoke_cache / "fml-bench" / "src" / "ml_tasks" / "Unlearning_open_unlearning" /
                       "retain_reference_logs.json").read_text())
    val, _ = tofu.split_indices(tofu.FIXTURE_FORGET)
    assert scored["forget_indices"] == val.tolist()
    assert scored["reference_truth_ratios"] == [logs["truth_ratios"][i] for i in val]
    # the fine-tuned model itself, unlearned by nothing: scored in full
    done = run_evaluate(tmp_path / "again", smoke_cache, model.read_bytes())
    assert done.returncode == 0, done.stderr
    means = json.loads((tmp_path / "again" / "r.json").read_text())["datasets"]["tofu_unlearning"]["means"]
    assert set(means) == {"forget_quality_mean", "model_utility_mean"}
    assert 0 < means["forget_quality_mean"] <= 1 and 0 < means["model_utility_mean"] < 1


def test_the_evaluator_refuses_weights_of_another_model(tmp_path, smoke_cache):
    import torch
    from safetensors.torch import save

    done = run_evaluate(tmp_path, smoke_cache, save({"model.embed_tokens.weight": torch.zeros(3, 2, dtype=torch.bfloat16),
                                                     "classifier.weight": torch.zeros(2, dtype=torch.bfloat16)}))
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "evaluate.py: model.safetensors does not hold this task's model: unexpected classifier.weight; missing "
        "model.layers.0.self_attn.q_proj.weight; missing model.layers.0.self_attn.k_proj.weight (and 18 more)"]
    done = run_evaluate(tmp_path / "text", smoke_cache, b"not a safetensors file")
    assert done.returncode == 1 and done.stderr.startswith("evaluate.py: model.safetensors is not a safetensors file")


def test_the_smoke_run_passes_offline(shared_run):
    record, run = assert_the_smoke_run_passed(TASK, shared_run)
    val_log = (run / "logs" / "step_0001_val.log").read_text()
    assert "unlearning: 64 forget pairs, 128 retain pairs, 1 epochs of 8 batches" in val_log, val_log
    assert "2 optimizer steps" in val_log and "val: unlearned weights in" in val_log
    assert "test: unlearned weights in" in (run / "logs" / "final_test.log").read_text()
    # open-unlearning's folders (the stand-in's) are in the workspace, as the original's checkout is
    assert (run / "search" / "workspace" / "src" / "trainer" / "unlearn" / "grad_ascent.py").is_file()


@needs_bwrap
def test_agent_code_cannot_reach_the_data_cache_or_the_reference_ratios(shared_run):
    assert_the_shared_attack_reached_nothing(shared_run)


def test_missing_data_is_one_line_before_any_step(pytester, bench, data_root):
    assert_missing_data_is_one_line(TASK, pytester, bench, data_root, "tofu (TOFU*; a git checkout with Git LFS files)")


def test_fetch_fails_closed_then_fetches_each_repository_with_its_lfs_objects(pytester, shared_run, tmp_path, data_root):
    """A repository without the pinned revision is refused and nothing is kept; at the fixture repositories' own
    commits each is fetched, the model's weights from its LFS store checked against the committed pointer; a
    corrupt LFS object is refused on one line."""
    # a copy: this test corrupts an LFS object of the fixtures it fetches from
    fixtures = tmp_path / "fixtures"
    shutil.copytree(shared_run.fixtures, fixtures, symlinks=True)
    args = assert_fetch_fails_closed(TASK, pytester, fixtures, data_root, then_fetch=False)
    full = pytester.path / "task_suites" / TASK.small_id / "full"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    for entry in spec["data"]:
        entry["commit"] = json.loads((fixtures / entry["name"] / "stamp.json").read_text())["commit"]
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    weights = fixtures / "tofu-llama-3.2-1b-instruct-full" / "src" / "model.safetensors"
    oid = hashlib.sha256(weights.read_bytes()).hexdigest()
    stored = weights.parent / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid
    good = stored.read_bytes()
    stored.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    done = fmlbench(*args)
    assert done.returncode == 1 and "tofu: fetched" in done.stdout, done.stdout
    assert f"has sha256 {hashlib.sha256(stored.read_bytes()).hexdigest()}, expected its pointer's {oid}" in done.stdout
    assert not (data_root / "tofu-llama-3.2-1b-instruct-full" / "src").exists()
    stored.write_bytes(good)
    done = fmlbench(*args)
    assert done.returncode == 0 and "tofu-llama-3.2-1b-instruct-full: fetched" in done.stdout, done.stdout
    fetched = data_root / "tofu-llama-3.2-1b-instruct-full" / "src" / "model.safetensors"
    assert fetched.read_bytes() == good
    assert (data_root / "tofu" / "src" / "forget10.json").is_file()
    assert (data_root / "fml-bench" / "src" / "ml_tasks" / "Unlearning_open_unlearning" /
            "retain_reference_logs.json").is_file()
    assert "tofu-llama-3.2-1b-instruct-full: cached" in fmlbench(*args).stdout


# Llama 3.2's way of dating a prompt: the caller's date_string, else today's date through strftime_now
DATED_TEMPLATE = ("{% if date_string is not defined %}{% set date_string = strftime_now('%d %b %Y') %}{% endif %}"
                  "{{ 'Today Date: ' + date_string + '\\n' }}{% for message in messages %}{{ message['role'] + ': ' "
                  "+ message['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}")


def _byte_tokenizer():
    """Every character its own token, so that two dates never tokenize alike."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {char: i for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|eot_id|>")
    tokenizer.chat_template = DATED_TEMPLATE
    return tokenizer


def _workspace_encode():
    sys.path.insert(0, str(WORKSPACE))
    try:
        import train  # the protected driver's own copy of the encoding
    finally:
        sys.path.remove(str(WORKSPACE))
        sys.modules.pop("algorithm", None)
    return sys.modules.pop("train").encode


@pytest.mark.parametrize("where", ["harness", "workspace"])
def test_the_chat_template_gets_a_fixed_date_so_two_days_give_one_prompt(monkeypatch, where):
    from datetime import datetime

    from transformers.utils import chat_template_utils

    encode = tofu.encode if where == "harness" else _workspace_encode()
    tokenizer = _byte_tokenizer()

    def on(day: datetime, fixed: bool = True):
        monkeypatch.setattr(chat_template_utils, "datetime", type("Today", (), {"now": staticmethod(lambda: day)}))
        if fixed:  # the workspace's copy gives tensors, the harness's lists
            return [list(map(int, ids)) for ids in encode(tokenizer, "Who wrote it?", "Jane Doe.").values()]
        return tokenizer.apply_chat_template([{"role": "user", "content": "Who wrote it?"}], tokenize=False)

    first, second = datetime(2025, 1, 1), datetime(2026, 12, 7)
    # the template does read today's date when none is given...
    assert on(first, fixed=False) != on(second, fixed=False) and "01 Jan 2025" in on(first, fixed=False)
    # ...and the task's encoding gives it one
    assert on(first) == on(second)
    text = tokenizer.decode(on(first)[0])
    assert f"Today Date: {tofu.CHAT_DATE}" in text
