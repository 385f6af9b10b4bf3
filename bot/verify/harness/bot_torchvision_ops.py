"""Let ``import torchvision`` succeed in a CPU environment whose torchvision has no compiled ops.

The package index serves torchvision only as a CUDA build; its ``_C`` library cannot load
against a CPU torch, which torchvision tolerates everywhere except two fake-kernel
registrations (``nms``, ``qnms``) that need the op to exist. Before that module runs, this
declares the missing op schemas with no kernel: importing works (vLLM's multimodal model files
import torchvision's transforms), and calling the op fails loudly, as it should here.

Installed into each release environment's site-packages with a ``.pth`` line, so it is active in
every interpreter of that environment; it imports nothing until torchvision is imported.
"""

from __future__ import annotations

import importlib.machinery
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # kept out of every interpreter start of the environment
    from collections.abc import Sequence
    from types import ModuleType
    from typing import Any

_REGISTRATIONS = "torchvision._meta_registrations"
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_libraries: list[Any] = []  # a torch.library.Library drops its definitions when collected


def declare_missing_ops() -> None:
    import torch
    import torchvision.extension

    if torchvision.extension._has_ops():
        return
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        library.define(schema)
    _libraries.append(library)


class _BeforeMetaRegistrations:
    """A meta path finder (duck-typed: ``importlib.abc`` costs 40 ms at every start)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _REGISTRATIONS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            declare_missing_ops()
            run_module(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    if not any(isinstance(finder, _BeforeMetaRegistrations) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BeforeMetaRegistrations())
