"""Realistic journal content for the dashboard tests: the seed case on a real vLLM 0.23.0 tree.

The seed patch is computed at test time from the real tree (nothing of vLLM is copied here).
"""

from __future__ import annotations

import functools
import json
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
import uvicorn

from bot import pipeline
from bot.content_hash import patch_hash
from bot.duplicate_search import DuplicateSearch
from bot.journal.store import Journal
from bot.plan import NEEDS_INFO, READY, Plan, write_plan_dir
from bot.publish.contribution import CHECKLIST, CONTRIBUTION
from bot.publish.duplicates import keywords_of
from bot.publish.tree_facts import rules_at
from bot.recipes.base import DeclaredEdit, Finding
from bot.triage_outcome import PROPOSE, Triage
from tests.claimed import claimed
from tests.cli import EXAMPLE_ISSUE

SEED_CLASS = "Qwen3NextForCausalLM"
SEED_FILE = "vllm/model_executor/models/qwen3_next.py"
# A hunk in a file the proposal never meant to touch, as if written to patch.diff later.
EXTRA_HUNK = """diff --git a/vllm/extra.py b/vllm/extra.py
new file mode 100644
--- /dev/null
+++ b/vllm/extra.py
@@ -0,0 +1 @@
+print("never shown")
"""
HOSTILE_TITLE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> & "quotes"'


@functools.cache
def _seed_proposal(tree: Path) -> tuple[str, str, str]:
    """The bot's own patch, edits and finding (as JSON) for the seed issue on ``tree``."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "plan"
        pipeline.propose(tree, out, issue=json.loads(EXAMPLE_ISSUE.read_text()))
        planned = json.loads((out / "plan.json").read_text())
        patch = (out / "patch.diff").read_text(encoding="utf-8")
        return patch, json.dumps(planned["edits"]), json.dumps(planned["finding"])


def seed_patch(tree: Path) -> str:
    """The bot's own patch for the seed issue on ``tree``: what `bot propose` writes."""
    return _seed_proposal(tree)[0]


def searched(tree: Path, base: str) -> DuplicateSearch:
    """The seed's duplicate search as propose records it when GitHub finds no PR (the
    stand-in's upstream starts with none): what publish finds again, so the body the
    maintainer reviewed is the body publish would post."""
    rules = rules_at(tree, base)
    return DuplicateSearch(
        ran=True,
        upstream="vllm-project/vllm",
        agents_commands=rules.duplicate_checks,
        keywords=(keywords_of(SEED_CLASS, SEED_FILE, [33329]),),
    )


def seed_plan_dir(root: Path, tree: Path, verified: bool = True) -> Path:
    base = git.Repo(tree).head.commit.hexsha
    # What propose derives (and publish derives again): recipe, class and base commit.
    fingerprint = f"eagle3-interface:{SEED_CLASS}:{base[:12]}"
    plan = Plan(
        status=READY,
        reason="Qwen3NextForCausalLM's model collects aux hidden states but lacks SupportsEagle3",
        recipe="eagle3-interface",
        class_name=SEED_CLASS,
        repo_path=str(tree),
        base_commit=base,
        vllm_version="0.23.0",
        issue_number=33329,
        issue_title="[Feature]: EAGLE-3 support for Qwen3-Next",
        triage=_triage(
            0.93,
            "issue names Qwen3NextForCausalLM",
            "inner model inherits EagleModelMixin",
            "forward calls _maybe_add_hidden_state",
        ),
        edits=[DeclaredEdit.from_json(e, "edit") for e in json.loads(_seed_proposal(tree)[1])],
        finding=Finding.from_json(json.loads(_seed_proposal(tree)[2])),
        branch="bot/eagle3-interface/qwen3-next-for-causal-lm",
        fingerprint=fingerprint,
        duplicate_search=searched(tree, base),
        verification=claimed(
            None,
            passed=verified,
            local_passed=True,
            message="all checks passed, GPU test passed" if verified else "GPU test failure",
            patch_hash=patch_hash(seed_patch(tree)),
            checks=[
                {"name": "git apply --check", "passed": True, "detail": "clean"},
                {"name": "ruff", "passed": True, "detail": "no findings"},
                {"name": "registry entry", "passed": True, "detail": "DFlashQwen3NextDraftModel"},
            ],
            gpu={
                "mode": "dispatch",
                "conclusion": "success" if verified else "failure",
                "run_url": "https://github.com/example/bot/actions/runs/42",
                "log_excerpt": "tests/models/test_eagle3.py::test_qwen3_next PASSED\n1 passed",
            },
        ),
    )
    body = (
        "Declare `SupportsEagle3` on `Qwen3NextForCausalLM`.\n\n"
        "Fixes #33329.\n\n"
        "| check | result |\n|---|---|\n| CPU | passed |\n| GPU | passed |\n\n"
        # Where publish writes the sections it composes from records (as propose leaves them).
        f"{CONTRIBUTION[0]}\n{CONTRIBUTION[1]}\n\n{CHECKLIST[0]}\n{CHECKLIST[1]}\n\n"
        f"<!-- bot:fingerprint={fingerprint} -->\n"
    )
    path = root / "seed-plan"
    write_plan_dir(path, plan, seed_patch(tree), f"[Model] Qwen3-Next: support EAGLE-3\n\n{body}")
    return path


def _triage(confidence: float, *reasons: str) -> Triage:
    return Triage(None, None, (), None, confidence, reasons, None, (), outcome=PROPOSE)


def hostile_plan_dir(root: Path) -> Path:
    plan = Plan(
        status=NEEDS_INFO,
        reason="triage lacked confidence",
        recipe="eagle3-interface",
        class_name="EvilForCausalLM",
        issue_number=99999,
        issue_title=HOSTILE_TITLE,
        triage=_triage(0.2, HOSTILE_TITLE),
        fingerprint="hostile-1",
    )
    path = root / "hostile-plan"
    body = f"Quoted from the issue: {HOSTILE_TITLE}\n\n[click](javascript:alert(1))\n"
    write_plan_dir(path, plan, "", f"{HOSTILE_TITLE}\n\n{body}")
    return path


def sample_findings() -> list[dict[str, object]]:
    return [
        {
            "recipe": "eagle3-interface",
            "class": f"Model{i}ForCausalLM",
            "path": f"vllm/model_executor/models/model_{i}.py",
            "line": 100 + i,
            "architectures": [f"Model{i}ForCausalLM"],
            "evidence": {"mixin": "EagleModelMixin"},
            "summary": "collects aux hidden states but lacks SupportsEagle3",
        }
        for i in range(3)
    ] + [
        {
            "recipe": "eagle3-interface",
            "class": SEED_CLASS,
            "path": SEED_FILE,
            "line": 709,
            "architectures": [SEED_CLASS],
            "evidence": {},
            "summary": "collects aux hidden states but lacks SupportsEagle3",
        }
    ]


def populate(journal: Journal, root: Path, tree: Path) -> dict[str, int]:
    journal.record_findings(sample_findings(), tree, "1e84f5b", "0.23.0")
    seed = journal.record_proposal(seed_plan_dir(root, tree))
    hostile = journal.record_proposal(hostile_plan_dir(root))
    return {"seed": seed, "hostile": hostile}


@contextmanager
def serve_in_thread(app: object) -> Iterator[str]:
    """The app under a real uvicorn on 127.0.0.1 (a free port); yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_from(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "no CSRF field on the page"
    return found.group(1)


_APPROVE_FORM = re.compile(
    r'<form method="post" action="/proposals/\d+/approve">(.*?)</form>', re.S
)
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_TYPED = re.compile(r'<input type="(?:text|email)" name="(signoff_[a-z]+)"[^>]*? value="([^"]*)"')
# The maintainer the dashboard tests approve as (``--as alice``), and the sign-off they type.
ALICE_SIGNOFF = {
    "signoff_name": "Alice Approver",
    "signoff_email": "alice@users.noreply.github.com",
}


def approve_form(
    html: str, read_every_line: bool = True, signoff: dict[str, str] | None = ALICE_SIGNOFF
) -> dict[str, str]:
    """The approve form as the browser submits it: its hidden fields, the sign-off fields as
    the page filled them in, overwritten by what the maintainer types (``signoff``), and their
    "I read every changed line" box ticked (or not)."""
    found = _APPROVE_FORM.search(html)
    assert found, "no approve form on the page"
    assert 'name="read_every_line"' in found.group(1), "no read-every-line box on the form"
    typed = dict(_TYPED.findall(found.group(1)))
    assert set(typed) == {"signoff_name", "signoff_email"}, "no sign-off fields on the form"
    ticked = {"read_every_line": "yes"} if read_every_line else {}
    return {**dict(_HIDDEN.findall(found.group(1))), **typed, **(signoff or {}), **ticked}
