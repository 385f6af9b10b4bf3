"""A vLLM tree's model files registered over an installed engine's classes (never imports the bot).

Used two ways: by ``bot_engine.py`` (the engine check), and as a vLLM *general plugin* (the
``vllm.general_plugins`` entry point vLLM loads in every process it starts: the front end, the
engine core, each worker), so a test run through ``LLM`` in its own processes builds the
tree's class, as upstream CI's installed build would. The plugin reads the job from the file
``BOT_OVERLAY`` names: ``{"files": {module: path}, "archs": {arch: [module, class]}}``, the
files executed in order as their modules.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType


class OverlayError(Exception):
    """A file does not import on this engine, or a named class is not in its module."""


def execute_files(files: dict[str, str]) -> dict[str, ModuleType]:
    """Execute each file as its module (replacing the engine's), in order."""
    done: dict[str, ModuleType] = {}
    for module_name, path in files.items():
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        previous = sys.modules.get(module_name)
        sys.modules[module_name] = module
        forget_custom_ops(module_name)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the file needs what this engine lacks
            if previous is not None:
                sys.modules[module_name] = previous
            raise OverlayError(f"{module_name} does not import on this engine: {exc!r}") from exc
        if previous is not None:
            parent, _, child = module_name.rpartition(".")
            with contextlib.suppress(KeyError):
                setattr(sys.modules[parent], child, module)
        done[module_name] = module
    return done


def forget_custom_ops(module_name: str) -> None:
    """vLLM refuses a custom op name registered twice ("Duplicate op name"), and a file executed
    again over its module registers its ops again: the ops of the module it replaces go."""
    with contextlib.suppress(ImportError, AttributeError):
        from vllm.model_executor import custom_op

        for name, op in list(custom_op.op_registry.items()):
            if getattr(op, "__module__", None) == module_name:
                del custom_op.op_registry[name]


def forget_resolved_architectures() -> None:
    """The engine remembers which class served a model directory; the next run must resolve
    the class registered now."""
    with contextlib.suppress(ImportError, AttributeError):
        from vllm.model_executor.model_loader import utils

        utils._MODEL_ARCH_BY_HASH.clear()
    with contextlib.suppress(ImportError, AttributeError):
        from vllm.model_executor.models import registry

        registry._try_load_model_cls.cache_clear()
        registry._try_inspect_model_cls.cache_clear()


def register(files: dict[str, str], archs: dict[str, tuple[str, str]]) -> None:
    """Execute ``files`` and register each architecture's class from them."""
    from vllm import ModelRegistry

    modules = execute_files(files)
    for arch, (module_name, class_name) in archs.items():
        module = modules.get(module_name) or importlib.import_module(module_name)
        found = getattr(module, class_name, None)
        if not isinstance(found, type):
            raise OverlayError(f"{module_name} has no class {class_name} for {arch}")
        ModelRegistry.register_model(arch, found)
    forget_resolved_architectures()


def register_available(files: dict[str, str], archs: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Like :func:`register`, file by file: a file that does not import on this engine leaves
    the architectures it holds unregistered (returned, with why) and the others go on."""
    from vllm import ModelRegistry

    failed: dict[str, str] = {}
    modules: dict[str, ModuleType] = {}
    for module_name, path in files.items():
        try:
            modules.update(execute_files({module_name: path}))
        except OverlayError as exc:
            failed[module_name] = f"{exc}"[:400]
    missing: dict[str, str] = {}
    for arch, (module_name, class_name) in archs.items():
        if module_name in failed:
            missing[arch] = failed[module_name]
            continue
        try:
            module = modules.get(module_name) or importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - the class's module needs what this lacks
            missing[arch] = f"{module_name} does not import on this engine: {exc!r}"[:400]
            continue
        found = getattr(module, class_name, None)
        if not isinstance(found, type):
            missing[arch] = f"{module_name} has no class {class_name}"
            continue
        ModelRegistry.register_model(arch, found)
    forget_resolved_architectures()
    return missing


_REGISTERED = False


_MISSING: dict[str, str] = {}


def plugin() -> dict[str, str]:
    """The ``vllm.general_plugins`` entry point: the job of ``BOT_OVERLAY``, once a process;
    returns the architectures left unregistered, with why."""
    global _REGISTERED
    job_file = os.environ.get("BOT_OVERLAY")
    if _REGISTERED or not job_file:
        return dict(_MISSING)
    _REGISTERED = True
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    archs = {arch: (str(m), str(c)) for arch, (m, c) in job["archs"].items()}
    _MISSING.update(register_available({str(k): str(v) for k, v in job["files"].items()}, archs))
    return dict(_MISSING)
