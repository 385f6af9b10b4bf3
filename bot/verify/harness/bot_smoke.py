"""Smoke check of an EAGLE-3 target on CPU: run by a vLLM verification environment's python.

This file is executed as a script with the vLLM tree under test first on ``sys.path``; it
imports only the standard library, torch, transformers and vLLM (never the bot). It builds the
class from a tiny random config derived from the architecture's own config class, runs forward
passes and writes one JSON result: ``{"status": "passed" | "failed" | "not_checked", ...}``.

Modes:
- ``reference`` (unpatched tree): one forward with no aux layers; the output is saved.
- ``patched``: the interface calls, one forward with the default aux layers (one aux tensor of
  the model's hidden size per requested layer), and one with none, which must equal the
  reference output bit for bit.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import tempfile
import traceback
import zlib
from pathlib import Path
from typing import Any

NUM_LAYERS = 6  # the interface's default aux layers are (2, n // 2, n - 3)
NUM_TOKENS = 8
SEED = 20261202


class NotChecked(Exception):
    """The model cannot be built or run on this CPU: nothing was proven either way."""


class Failed(Exception):
    """The patched model does not behave as an EAGLE-3 target."""


# Attribute names of transformers' configs, shrunk so a model builds and runs in seconds.
_SIZES: dict[str, int] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "vocab_size": 512,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "max_position_embeddings": 256,
    "sliding_window": 64,
    "num_nextn_predict_layers": 0,
}


def tiny_config(config_class: type) -> Any:
    """An instance of the architecture's own config class, shrunk to a few seconds of CPU."""
    config = config_class()
    for name, value in _SIZES.items():
        if hasattr(config, name) and (
            getattr(config, name) is None or isinstance(getattr(config, name), int)
        ):
            setattr(config, name, value)
    config.num_hidden_layers = NUM_LAYERS
    config.tie_word_embeddings = False
    if isinstance(getattr(config, "layer_types", None), list):
        # Hybrid models (linear attention) have Triton-only kernels; full attention has a
        # native path, and the aux capture lives in the decoder loop, not in the layer.
        config.layer_types = ["full_attention"] * NUM_LAYERS
    if hasattr(config, "full_attention_interval"):
        config.full_attention_interval = 1
    if hasattr(config, "first_k_dense_replace"):
        config.first_k_dense_replace = 1
    rope = getattr(config, "rope_scaling", None)
    if isinstance(rope, dict) and rope.get("rope_type") not in (None, "default"):
        config.rope_scaling = None
    return config


def config_class_for(model_type: str) -> type:
    """The config class of ``model_type``: vLLM's own configs first, then transformers'."""
    with contextlib.suppress(Exception):
        from vllm.transformers_utils.config import _CONFIG_REGISTRY  # type: ignore

        if model_type in _CONFIG_REGISTRY:
            entry = _CONFIG_REGISTRY[model_type]
            if isinstance(entry, str):
                configs = importlib.import_module("vllm.transformers_utils.configs")
                entry = getattr(configs, entry)
            return entry
    from transformers import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[model_type]
    except KeyError:
        raise NotChecked(f"no config class is known for model_type {model_type!r}") from None


def model_type_of(module: Any, cls: type) -> str:
    """The model_type the class is built from: the config class its module imports."""
    candidates = []
    for value in vars(module).values():
        model_type = getattr(value, "model_type", None)
        is_config = isinstance(value, type) and value.__name__.endswith("Config")
        if is_config and isinstance(model_type, str) and model_type:
            candidates.append((value.__name__, model_type))
    arch = cls.__name__.removesuffix("ForCausalLM").lower()
    for name, model_type in sorted(candidates):
        if name.lower().removesuffix("config") == arch:
            return model_type
    if len({m for _, m in candidates}) == 1:
        return candidates[0][1]
    if not candidates:
        return _config_by_name(cls)
    raise NotChecked(
        f"cannot tell which config class builds {cls.__name__}: "
        f"its module imports {', '.join(n for n, _ in candidates) or 'none'}"
    )


def _config_by_name(cls: type) -> str:
    """``XForCausalLM`` -> ``XConfig`` in vLLM's own configs or in transformers."""
    import transformers

    name = cls.__name__.removesuffix("ForCausalLM") + "Config"
    places = [transformers]
    with contextlib.suppress(Exception):
        places.insert(0, importlib.import_module("vllm.transformers_utils.configs"))
    for place in places:
        config_class = getattr(place, name, None)
        if isinstance(getattr(config_class, "model_type", None), str):
            return config_class.model_type
    raise NotChecked(
        f"no config class to derive a tiny config from: the module of {cls.__name__} imports "
        f"none, and neither vLLM's configs nor transformers define {name}"
    )


def vllm_config_for(model_dir: Path) -> Any:
    import vllm.triton_utils as triton_utils
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=str(model_dir),
        skip_tokenizer_init=True,
        enforce_eager=True,
        dtype="float32",
        max_model_len=64,
        load_format="dummy",
        compilation_config={"mode": 0, "custom_ops": ["none"]},
    )
    # The CPU platform refuses x86 without triton-cpu; the harness runs eager native ops only.
    had = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    try:
        return args.create_engine_config()
    finally:
        triton_utils.HAS_TRITON = had


def init_distributed(tmp: Path) -> None:
    from vllm.distributed import parallel_state

    parallel_state.init_distributed_environment(
        world_size=1,
        rank=0,
        local_rank=0,
        distributed_init_method=f"file://{tmp / 'dist-init'}",
        backend="gloo",
    )
    parallel_state.initialize_model_parallel(1, 1)


def fill_weights(model: Any) -> None:
    """Deterministic weights by parameter name: the same on the unpatched and patched model."""
    import torch

    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        generator = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        values = torch.rand(param.shape, generator=generator, dtype=torch.float32)
        with torch.no_grad():
            param.copy_(((values - 0.5) * 0.1).to(param.dtype))


def native_attention(model: Any) -> int:
    """Give each of vLLM's ``Attention`` layers a native causal attention over the batch.

    With no attention metadata (no KV cache, no scheduler) vLLM's backends return their
    output buffer unfilled, which is not deterministic; a plain causal SDPA over the tokens is.
    Returns how many layers were replaced.
    """
    import torch
    from vllm.model_executor.layers.attention.attention import Attention

    def forward(self: Any, query: Any, key: Any, value: Any, output_shape: Any = None, **_: Any):
        tokens = query.shape[0]
        heads, kv_heads = self.num_heads, self.num_kv_heads
        head_size = self.head_size
        head_size_v = getattr(self, "head_size_v", head_size)
        q = query.reshape(tokens, heads, head_size).transpose(0, 1)
        k = key.reshape(tokens, kv_heads, head_size).transpose(0, 1)
        v = value.reshape(tokens, kv_heads, head_size_v).transpose(0, 1)
        if kv_heads != heads:
            k = k.repeat_interleave(heads // kv_heads, dim=0)
            v = v.repeat_interleave(heads // kv_heads, dim=0)
        scale = getattr(self.impl, "scale", None) or head_size**-0.5
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=float(scale)
        )
        out = out.transpose(0, 1).reshape(tokens, heads * head_size_v)
        return out.reshape(output_shape) if output_shape is not None else out

    replaced = 0
    for module in model.modules():
        if isinstance(module, Attention):
            module.forward = forward.__get__(module)
            replaced += 1
    return replaced


def build(module_name: str, class_name: str, tmp: Path) -> tuple[Any, Any, type]:
    import torch
    from bot_vllm_cpu import force_cpu_platform

    force_cpu_platform()
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except Exception as exc:  # noqa: BLE001 - any import failure means: not buildable here
        raise NotChecked(f"cannot import {module_name}.{class_name}: {_one_line(exc)}") from None
    config = tiny_config(config_class_for(model_type_of(module, cls)))
    config.architectures = [class_name]
    model_dir = tmp / "model"
    model_dir.mkdir()
    config.save_pretrained(model_dir)
    try:
        vllm_config = vllm_config_for(model_dir)
    except Exception as exc:  # noqa: BLE001
        raise NotChecked(f"vLLM refuses the tiny config: {_one_line(exc)}") from None
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import process_weights_after_loading

    torch.manual_seed(SEED)
    with set_current_vllm_config(vllm_config):
        init_distributed(tmp)
        try:
            model = cls(vllm_config=vllm_config, prefix="")
        except Exception as exc:  # noqa: BLE001
            raise NotChecked(f"{class_name} cannot be built on CPU: {_one_line(exc)}") from None
        fill_weights(model)
        native_attention(model)
        model.eval()
        process_weights_after_loading(model, vllm_config.model_config, torch.device("cpu"))
    return model, vllm_config, cls


def forward(model: Any, vllm_config: Any) -> Any:
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    input_ids = torch.arange(NUM_TOKENS, dtype=torch.long) % 97
    positions = torch.arange(NUM_TOKENS, dtype=torch.long)
    with (
        torch.no_grad(),
        set_current_vllm_config(vllm_config),
        set_forward_context(None, vllm_config, num_tokens=NUM_TOKENS),
    ):
        return model(input_ids=input_ids, positions=positions)


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import torch

    model, vllm_config, cls = build(args.module, args.cls, tmp)
    hidden_size = int(vllm_config.model_config.hf_config.hidden_size)
    if args.mode == "reference":
        try:
            output = forward(model, vllm_config)
        except Exception as exc:  # noqa: BLE001
            raise NotChecked(f"the forward pass cannot run on CPU: {_one_line(exc)}") from None
        if not isinstance(output, torch.Tensor):
            raise NotChecked(f"the unpatched forward returned {type(output).__name__}")
        torch.save(output, args.output)
        return {"status": "passed", "detail": f"reference output {tuple(output.shape)}"}

    from vllm.model_executor.models.interfaces import supports_eagle3

    if not supports_eagle3(cls):
        raise Failed(f"{cls.__name__} does not declare SupportsEagle3 after the patch")
    try:
        # Setting comes first: it is what fails when the decoder cannot collect aux states.
        model.set_aux_hidden_state_layers((2, NUM_LAYERS // 2, NUM_LAYERS - 3))
        layers = tuple(model.get_eagle3_default_aux_hidden_state_layers())
        model.set_aux_hidden_state_layers(layers)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"the EAGLE-3 interface fails on {cls.__name__}: {_one_line(exc)}") from None
    try:
        output = forward(model, vllm_config)
    except Exception as exc:  # noqa: BLE001
        raise Failed(f"the forward with aux layers {layers} fails: {_one_line(exc)}") from None
    requested = sorted(set(layers))
    if not (isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], list)):
        raise Failed(
            f"with aux layers {layers} set, forward returned {type(output).__name__}, "
            "not (hidden_states, [aux hidden states]): the decoder does not collect them"
        )
    aux = output[1]
    if len(aux) != len(requested):
        raise Failed(f"{len(aux)} aux hidden states for the {len(requested)} layers {requested}")
    for tensor in aux:
        if tuple(tensor.shape) != (NUM_TOKENS, hidden_size):
            raise Failed(
                f"an aux hidden state has shape {tuple(tensor.shape)}, "
                f"not ({NUM_TOKENS}, {hidden_size})"
            )
    model.set_aux_hidden_state_layers(())
    plain = forward(model, vllm_config)
    reference = torch.load(args.reference)
    if not isinstance(plain, torch.Tensor) or not torch.equal(plain, reference):
        raise Failed("with no aux layers set, the output differs from the unpatched model's")
    return {
        "status": "passed",
        "detail": (
            f"{cls.__name__} on a tiny random config ({NUM_LAYERS} layers, hidden size "
            f"{hidden_size}): {len(aux)} aux hidden states for layers {requested}; with none "
            "requested the output equals the unpatched model's bit for bit"
        ),
    }


def _one_line(exc: BaseException) -> str:
    """The exception in one line, and where it was raised (a bare assert says nothing else)."""
    text = f"{exc.__class__.__name__}: {exc}".strip().splitlines()
    line = text[0] if text else exc.__class__.__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        where = frames[-1]
        path = where.filename
        if "/vllm/" in path:
            path = "vllm/" + path.split("/vllm/", 1)[1]
        code = (where.line or "").rstrip(" ,(")
        line += f" (at {path}:{where.lineno}: {code})" if code else f" (at {path}:{where.lineno})"
    return line[:400]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--module", required=True)
    parser.add_argument("--cls", required=True)
    parser.add_argument("--mode", choices=("reference", "patched"), required=True)
    parser.add_argument("--output", help="reference: where to save the output tensor")
    parser.add_argument("--reference", help="patched: the reference output tensor")
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bot-smoke-") as tmp:
        try:
            result = run(args, Path(tmp))
        except NotChecked as exc:
            result = {"status": "not_checked", "detail": str(exc)}
        except Failed as exc:
            result = {"status": "failed", "detail": str(exc)}
        except Exception as exc:  # noqa: BLE001 - reported, never a traceback in the result
            traceback.print_exc()
            status = "not_checked" if args.mode == "reference" else "failed"
            result = {"status": status, "detail": f"the harness stopped: {_one_line(exc)}"}
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    sys.exit(main())
