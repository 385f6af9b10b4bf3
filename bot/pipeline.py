"""The flow, top to bottom: scan -> (triage) -> propose -> verify -> publish.

Each stage takes plain values and returns plain values; the plan directory is the handoff
between the unprivileged half (scan, triage, edit, test) and the privileged half (publish).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.errors import BotError
from bot.plan import NOTHING_TO_FIX, Plan, check_plan_target, write_plan_dir
from bot.recipes import RECIPES, Finding, ScanContext
from bot.tree.index import ClassIndex, build_index, is_vllm_tree
from bot.tree.model_registry import load_model_registry
from bot.tree.version import tree_version

if TYPE_CHECKING:
    from bot.publish import PublishResult
    from bot.store import Journal


@dataclass
class ScanResult:
    context: ScanContext
    findings: list[Finding]

    @property
    def root(self) -> Path:
        return self.context.root

    @property
    def problems(self) -> list[str]:
        return self.context.index.problems

    @property
    def files_parsed(self) -> int:
        return self.context.index.parsed

    @property
    def files_indexed(self) -> int:
        return len(self.context.index.modules)


def scan_context(root: Path, *, use_cache: bool = True) -> ScanContext:
    root = Path(root)
    if not root.is_dir():
        raise BotError(f"{root}: no such directory")
    if not is_vllm_tree(root):
        raise BotError(
            f"{root} is not a vLLM tree (no vllm/model_executor/models); "
            "pass the root of a vLLM checkout, or run `bot fetch VERSION` to get one"
        )
    index: ClassIndex = build_index(root, use_cache=use_cache)
    return ScanContext(root=root.resolve(), index=index, registry=load_model_registry(root))


def scan(root: Path, *, use_cache: bool = True, record: bool = False) -> ScanResult:
    """Every recipe's findings in the tree; ``record`` also keeps them in the journal."""
    ctx = scan_context(root, use_cache=use_cache)
    findings: list[Finding] = []
    for recipe in RECIPES:
        findings.extend(recipe.detect(ctx))
    findings.sort(key=lambda f: (f.recipe, f.path, f.line))
    result = ScanResult(context=ctx, findings=findings)
    if record:
        _journal().record_findings(
            [f.to_json() for f in findings],
            ctx.root,
            _head_or_none(ctx.root) or "",
            tree_version(ctx.root),
        )
    return result


def _journal() -> Journal:
    from bot.store import Journal

    return Journal()


def _head_or_none(root: Path) -> str | None:
    from bot.tree.worktree import head_commit

    try:
        return head_commit(root)
    except BotError:
        return None  # a plain directory: findings are still worth keeping


# -- propose ---------------------------------------------------------------------------------


def propose(
    repo: Path,
    out: Path,
    *,
    issue: dict[str, Any] | None = None,
    class_name: str | None = None,
    upstream: str | None = None,
    record: bool = False,
) -> Plan:
    """Scan ``repo``, pick the finding the issue (or ``class_name``) is about, write the plan.

    The plan records the upstream it is for (default: ``BOT_UPSTREAM``); publish refuses it
    anywhere else. ``record`` also keeps the plan in the journal, for review on the dashboard.
    """
    from bot.config import github_settings
    from bot.drafts import load_catalogue
    from bot.propose import proposal_for
    from bot.triage import triage_issue

    check_plan_target(out)
    repo = Path(repo).resolve()
    result = scan(repo)
    catalogue = load_catalogue()
    triage = triage_issue(issue, repo, catalogue) if issue is not None else None
    plan, patch, pr_markdown = proposal_for(
        repo,
        result,
        triage=triage,
        issue=issue,
        class_name=class_name,
        upstream=upstream or github_settings().upstream,
        catalogue=catalogue,
    )
    write_plan_dir(out, plan, patch, pr_markdown)
    if record and plan.status != NOTHING_TO_FIX:
        _journal().record_proposal(out)
    return plan


_PR_STATE_AFTER = {"merged": "merged", "closed-by-maintainer": "closed"}


def publish(plan_dir: Path, *, reviewer: str | None) -> PublishResult:
    """Open or update the plan's PR, then note what GitHub now has in the journal."""
    from bot.publish import publish_plan

    result = publish_plan(plan_dir, reviewer=reviewer)
    journal = _journal()
    proposal_id = journal.record_proposal(plan_dir)
    if result.pr_number:
        state = _PR_STATE_AFTER.get(result.action, "open")
        journal.record_pr(proposal_id, result.pr_number, result.pr_url, state, reviewer or "bot")
    return result


def default_plan_dir(issue: int | None, class_name: str | None) -> Path:
    from bot.config import home_dir

    name = f"issue-{issue}" if issue is not None else f"class-{class_name}"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    return home_dir() / "plans" / safe


def demo(out: Path, *, version: str = "0.23.0") -> tuple[Plan, str]:
    """The main job, offline: the bundled example issue against a cached vLLM release."""
    from bot.issues import read_issue_file
    from bot.tree.fetch import release_tree

    tree = release_tree(version)
    issue = read_issue_file(Path(__file__).parent / "data" / "example_issue.json")
    plan = propose(tree, out, issue=issue)
    return plan, (out / "patch.diff").read_text(encoding="utf-8")
