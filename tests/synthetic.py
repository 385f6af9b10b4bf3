"""Small synthetic vLLM-shaped trees for edge cases the real releases don't cover.

The interfaces module mirrors only the names the recipes look for; models are a few lines each.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from bot.recipes.cases import capturing_decoder

INTERFACES = """
from typing import ClassVar, Literal, Protocol


class SupportsPP(Protocol):
    pass


class SupportsMultiModal(Protocol):
    def get_language_model(self):
        return self.language_model


class SupportsEagleBase(Protocol):
    pass


class EagleModelMixin:
    aux_hidden_state_layers: tuple[int, ...] = ()

    def _maybe_add_hidden_state(self, aux_hidden_states, layer_idx, hidden_states, residual):
        return aux_hidden_states


class SupportsEagle3(SupportsEagleBase, Protocol):
    supports_eagle3: ClassVar[Literal[True]] = True

    def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
        parent_ref = self
        if hasattr(self, "get_language_model"):
            parent_ref = self.get_language_model()
        holder = getattr(parent_ref, "model", parent_ref)
        holder._set_aux_hidden_state_layers(layers)

    def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
        parent_ref = self
        if hasattr(self, "get_language_model"):
            parent_ref = self.get_language_model()
        holder = getattr(parent_ref, "model", parent_ref)
        num_layers = len(holder.layers)
        return (2, num_layers // 2, num_layers - 3)


class VllmModelForPooling(Protocol):
    is_pooling_model: ClassVar[Literal[True]] = True
"""

# A template: ``.format(name=...)`` names the decoder class.
READY_DECODER = capturing_decoder("{name}").removeprefix("\n")


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def make_tree(root: Path, models: dict[str, str], registry: dict[str, dict[str, tuple]]) -> Path:
    """Write a minimal vLLM tree: ``models`` maps a relative path under ``vllm/`` to source;
    ``registry`` maps a dict name (``_TEXT_GENERATION_MODELS``) to ``{arch: (module, class)}``."""
    files = {
        "vllm/__init__.py": "",
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/models/__init__.py": "",
        "vllm/model_executor/models/interfaces.py": dedent(INTERFACES),
    }
    lines = ["# registry (synthetic)", ""]
    for dict_name, entries in registry.items():
        lines.append(f"{dict_name} = {{")
        lines.append("    # [Decoder-only]")
        for arch, (module, cls) in entries.items():
            lines.append(f'    "{arch}": ("{module}", "{cls}"),')
        lines.append("}")
    files["vllm/model_executor/models/registry.py"] = "\n".join(lines) + "\n"
    for rel, source in models.items():
        files[f"vllm/{rel}"] = dedent(source)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
