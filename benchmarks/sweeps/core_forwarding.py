"""Check: the core-eagle3-forwarding plan's defaults, run in the release's real interfaces module.

The engine harness builds text-only targets, so the wrappers this core plan serves cannot run in
the CPU engine. This runs the release's own ``vllm/model_executor/models/interfaces.py`` (the
tree first on ``PYTHONPATH``, in the release's verification environment, sandboxed) before and
after the plan's patch, with small ``torch.nn`` wrappers over three kinds of language model:

- one whose ``.model`` has ``EagleModelMixin`` and that overrides both methods (the Qwen3.5
  family's shape): today's unwrap must stay the path, its override never called;
- one that declares ``SupportsEagle3`` and keeps its decoder at ``.transformer`` with its own two
  methods (an enable plan's delegating form): forwarded to after the patch, an error before;
- one that can serve nothing: the tree's guard's ``RuntimeError`` after, an ``AssertionError``
  before.

    .venv/bin/python -m benchmarks.sweeps.core_forwarding --version 0.34.0 --plan CORE_PLAN_DIR
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bot.subprocess_env import run_upstream_code
from bot.tree.fetch import release_tree
from bot.tree.worktree import scratch_worktree
from bot.verify.env import vllm_env

CHILD = r"""
import json, sys
import torch.nn as nn
from vllm.model_executor.models import interfaces as m

class Decoder(nn.Module, m.EagleModelMixin):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Identity() for _ in range(8))

class Overriding(nn.Module, m.SupportsEagle3):
    def __init__(self):
        super().__init__()
        self.model = Decoder()
        self.calls = []
    def set_aux_hidden_state_layers(self, layers):
        self.calls.append(layers)
    def get_eagle3_default_aux_hidden_state_layers(self):
        return (0,)

class Elsewhere(nn.Module, m.SupportsEagle3):
    def __init__(self):
        super().__init__()
        self.transformer = Decoder()
    def set_aux_hidden_state_layers(self, layers):
        self.transformer._set_aux_hidden_state_layers(layers)
    def get_eagle3_default_aux_hidden_state_layers(self):
        return (1, 4, 5)

class Incapable(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Linear(2, 2)

class Wrapper(nn.Module, m.SupportsEagle3):
    def __init__(self, lm):
        super().__init__()
        self.language_model = lm
    def get_language_model(self):
        return self.language_model

def outcome(call):
    try:
        return {"ok": repr(call())}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}

result = {}
lm = Overriding()
w = Wrapper(lm)
result["served today: set"] = outcome(lambda: w.set_aux_hidden_state_layers((2, 4, 5)))
result["served today: decoder set, override calls"] = {
    "ok": repr((lm.model.aux_hidden_state_layers, lm.calls))
}
result["served today: default layers"] = outcome(w.get_eagle3_default_aux_hidden_state_layers)
lm = Elsewhere()
w = Wrapper(lm)
result["decoder elsewhere: set"] = outcome(lambda: w.set_aux_hidden_state_layers((1, 3)))
result["decoder elsewhere: reached"] = {"ok": repr(lm.transformer.aux_hidden_state_layers)}
result["decoder elsewhere: default layers"] = outcome(w.get_eagle3_default_aux_hidden_state_layers)
w = Wrapper(Incapable())
result["incapable: set"] = outcome(lambda: w.set_aux_hidden_state_layers((1,)))
result["incapable: default layers"] = outcome(w.get_eagle3_default_aux_hidden_state_layers)
json.dump(result, sys.stdout)
"""


def run(version: str, tree: Path, env_python: Path, work: Path) -> dict[str, dict[str, str]]:
    script = work / "forwarding_check.py"
    script.write_text(CHILD, encoding="utf-8")
    done = run_upstream_code(
        [str(env_python), str(script)],
        cwd=work,
        extra={"PYTHONPATH": str(tree), "VLLM_TARGET_DEVICE": "cpu"},
        timeout=900,
        readable=[work],
    )
    if done.returncode != 0:
        raise SystemExit(f"the check did not run on {version}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", default="0.34.0")
    parser.add_argument("--plan", type=Path, required=True, help="the core-eagle3-forwarding plan")
    args = parser.parse_args()
    patch = (args.plan / "patch.diff").read_text(encoding="utf-8")
    base = json.loads((args.plan / "plan.json").read_text(encoding="utf-8"))["base_commit"]
    env = vllm_env(args.version)
    results = {}
    with (
        tempfile.TemporaryDirectory(prefix="bot-forwarding-") as tmp,
        scratch_worktree(release_tree(args.version), base) as tree,
    ):
        results["before"] = run(args.version, tree, env.python, Path(tmp))
        subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=tree, check=True)
        results["after"] = run(args.version, tree, env.python, Path(tmp))
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
