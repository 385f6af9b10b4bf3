"""Sweep: publish three verified 0.34.0 plans through the GitHub stand-in, one per path a person
attests on, and hold each posted body against the tree's own rules, line by line.

Not part of ``./dev bench`` (a subdirectory): each plan is proposed and verified beforehand
(minutes to tens of minutes a plan), then published here against the stand-in of
tests/github_standin (real PyGithub, a bare fork seeded from the release tree):

- ``--enable``: an eagle3-enable plan made from an issue (`bot propose --issue N --issue-file
  F`): its demand is the issue; the submitter attests at the `bot publish` confirmation;
- ``--interface``: the interface-only group, made with a triaged issue for one member in the
  journal: its demand is that issue; a maintainer approves it on the review dashboard (the
  dashboard's approve action, its read-every-line box ticked);
- ``--wrapper``: a wrapper group nobody asked for: it waits on the dashboard issue; a maintainer
  requests it there, then approves it by ticking its line (``bot sync``).

For each it writes ``OUT/<name>.md`` (the body GitHub received) and prints, for every
requirement the tree states (AGENTS.md, the PR template, the pr-checklist skill,
docs/contributing/README.md), the requirement quoted and the body's line that meets it, or
"NOT MET". It checks that the posted body is the attested one and within the limits.

    .venv/bin/python -m benchmarks.sweeps.posted_bodies --enable DIR --interface DIR \\
        --wrapper DIR --out DIR
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import git

from bot.content_hash import patch_hash
from bot.dashboard import actions
from bot.dashboard.sync import sync
from bot.github.client import GitHubClient
from bot.journal.store import Journal
from bot.pipeline import refresh_duplicate_search
from bot.plan import read_plan_dir
from bot.publish.attestation import at_terminal, body_sha
from bot.publish.contrib_rules import rules_of_tree
from bot.publish.pr import BODY_LIMIT, publish_plan
from bot.tree.fetch import release_tree
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_FORK_OWNER, STANDIN_TOKEN
from tests.github_standin.server import GitHubStandIn

UPSTREAM = "vllm-project/vllm"
FORK = f"{STANDIN_FORK_OWNER}/vllm"
ALICE = "ghp_aliceTOKEN0123456789abcdefghijklmn"
ALICE_NAME = "Alice Maintainer"
ALICE_NOREPLY = "alice@users.noreply.github.com"
AIMS = {"enable": 6_000, "interface": 20_000, "wrapper": 20_000}


@contextmanager
def standin(root: Path, tree: Path, issues: dict[int, str]) -> Iterator[GitHubStandIn]:
    server = GitHubStandIn(root / "standin").start()
    server.add_token(STANDIN_TOKEN, STANDIN_BOT_LOGIN)
    server.add_token(ALICE, "alice")
    server.add_user("alice", ALICE_NAME)  # the profile name a tick on the dashboard signs with
    server.add_repo(UPSTREAM, seed_from=tree)
    server.add_repo(FORK, seed_from=tree)
    server.add_repo("example/bot")
    for number, title in issues.items():
        server.add_issue(UPSTREAM, number, title, title)
    remotes = root / "standin" / "remotes"
    os.environ.update(
        {
            "GITHUB_TOKEN": STANDIN_TOKEN,
            "GITHUB_API_URL": server.api_url,
            "BOT_FORK_OWNER": STANDIN_FORK_OWNER,
            "BOT_SUBMITTER_NAME": "Ada Submitter",
            "BOT_SUBMITTER_EMAIL": "ada@example.org",
            "BOT_HOME": str(root / "home"),
            "BOT_REPO": "example/bot",
            "BOT_MAINTAINERS": "alice",
            "BOT_FORK_URL": f"{remotes / FORK}.git",
            "BOT_UPSTREAM_URL": f"{remotes / UPSTREAM}.git",
            "BOT_GITHUB_MAX_WAIT": "0",
            "BOT_GITHUB_BACKOFF": "0",
        }
    )
    try:
        yield server
    finally:
        server.stop()


def _copy(plan: Path, root: Path, name: str) -> Path:
    out = Path(shutil.copytree(plan, root / name))
    refresh_duplicate_search(out)  # as propose records it when GitHub answers
    return out


def publish_as_submitter(plan: Path, root: Path) -> tuple[str, str]:
    """The CLI's confirmation: the submitter reads the diff and the body and answers y."""
    shown: list[str] = []
    result = publish_plan(
        plan, reviewer=None, work_dir=root / "work", attest=at_terminal(shown.append, _yes)
    )
    assert result.action == "opened", result
    return _posted(result.pr_number), shown[0]


def approve_on_the_dashboard(plan: Path, root: Path) -> tuple[str, str]:
    """The dashboard's approve action, with its "I read every changed line" box ticked."""
    from bot.content_hash import review_hash

    journal = Journal(root / "journal.sqlite3")
    proposal = journal.record_proposal(plan)
    shown = journal.as_published(proposal)
    digest = review_hash(shown.patch, shown.pr_markdown, shown.plan)
    outcome = actions.approve(
        journal,
        proposal,
        "alice",
        approved_hash=digest,
        read_every_line=True,
        signoff=(ALICE_NAME, ALICE_NOREPLY, ()),  # what she types on the approve form
    )
    assert outcome.done, outcome.message
    number = journal.proposal(proposal).pr_number
    return _posted(number), shown.pr_markdown


def request_then_tick(plan: Path, root: Path) -> tuple[str, str]:
    """Nobody asked for it: it waits on the dashboard issue; alice requests it, then ticks its
    approval line (each tick read from the issue's edit history by `bot sync`)."""
    journal = Journal(root / "journal.sqlite3")
    proposal = journal.record_proposal(plan)
    fingerprint = journal.proposal(proposal).fingerprint
    waiting = publish_plan(
        plan, reviewer=None, work_dir=root / "work", attest=at_terminal(_no, _yes)
    )
    assert waiting.action == "waiting-for-demand", waiting
    github = GitHubClient()
    for marker in (f"bot:request={fingerprint} ", f"bot:approve={fingerprint} "):
        sync(journal, github)
        [issue] = github.list_issues("example/bot", creator=STANDIN_BOT_LOGIN, state="open")
        line = next(x for x in issue["body"].splitlines() if marker in x)
        ticked = issue["body"].replace(line, line.replace("- [ ] ", "- [x] ", 1))
        GitHubClient(token=ALICE).edit_issue("example/bot", issue["number"], body=ticked)
    report = sync(journal, github)
    assert report.approved == [fingerprint], report.lines()
    shown = journal.as_published(proposal)
    return _posted(journal.proposal(proposal).pr_number), shown.pr_markdown


def _yes(_question: str) -> bool:
    return True


def _no(_shown: str) -> None:
    return None


def _posted(number: int | None) -> str:
    client = GitHubClient()
    return str(client.get_pull(int(number or 0), repo=UPSTREAM)["body"])


# --- the rules, each with the body's line that meets it ---------------------------------------


Matcher = Callable[[str], bool]


def requirements(tree: Path) -> list[tuple[str, str, Matcher]]:
    """(where, the rule quoted from the tree, how a body line meets it)."""
    rules = rules_of_tree(tree)
    agents = (tree / "AGENTS.md").read_text(encoding="utf-8")
    found: list[tuple[str, str, Matcher]] = []

    def quoted(text: str, phrase: str) -> str:
        start = text.index(phrase)
        end = text.find("\n", start)
        return " ".join(text[start:end].split())

    found.append(
        (
            "AGENTS.md",
            quoted(agents, "If an open PR already addresses the same fix"),
            lambda line: "No open or merged PR covers" in line,
        )
    )
    for command in rules.duplicate_checks:
        pattern = re.escape(command).replace(re.escape("--state open"), "--state (open|all)")
        pattern = pattern.replace(re.escape("<issue_number>"), r"\d+")
        pattern = pattern.replace(re.escape("<short area keywords>"), r"[^\"]+")
        found.append(
            ("AGENTS.md", command, lambda line, p=re.compile(pattern): bool(p.search(line)))
        )
    found.append(
        (
            "AGENTS.md",
            quoted(agents, "Pure code-agent PRs"),
            lambda line: "read every changed line of the patch" in line,
        )
    )
    found.append(
        (
            "AGENTS.md",
            quoted(agents, "The submitting human must review"),
            lambda line: "read every changed line" in line and "ran" in line,
        )
    )
    checks = {
        "Why this is not duplicating": lambda line: line.startswith("**Why this is not a dup"),
        "Test commands run and results": lambda line: line.startswith("| `pytest -v"),
        "Model evaluation results": lambda line: line.startswith("**Model evaluation:**"),
        "Clear statement that AI": lambda line: "AI assistance was used:" in line,
    }
    for item in rules.description_must_include:
        matcher = next((m for k, m in checks.items() if item.startswith(k)), None)
        found.append(("AGENTS.md", item, matcher or (lambda line: False)))
    found.append(
        (
            "AGENTS.md",
            quoted(agents, "Before opening a PR (drafts included)"),
            lambda line: "pr-checklist report" in line,
        )
    )
    for heading in rules.template_headings:
        found.append(
            (PR_TEMPLATE, f"## {heading}", lambda line, h=heading: line.strip() == f"## {h}")
        )
    for item in rules.template_checklist:
        found.append((PR_TEMPLATE, f"- [ ] {item}", lambda line, i=item: line.endswith(f"] {i}")))
    skill = {
        "4.1 short 1-2 line summary": lambda line: line.startswith(("This PR fixes", "`")),
        "4.1 collapsible HTML details for lengthy supporting material": lambda line: (
            "<details><summary>" in line
        ),
        "2.1 the new test failing without the fix and passing with it": lambda line: (
            "without the fix, then with it" in line
        ),
        "4.3 root-cause analysis": lambda line: line.startswith("**Root cause"),
        "1.3 complexity tier": lambda line: line.startswith("**Summary:**"),
    }
    for name, matcher in skill.items():
        found.append(("pr-checklist SKILL.md", name, matcher))
    guide = (tree / "docs/contributing/README.md").read_text(encoding="utf-8")
    found.append(
        (
            "docs/contributing/README.md",
            quoted(guide, "2. **Disclose in PR**"),
            lambda line: "AI assistance was used:" in line,
        )
    )
    return found


PR_TEMPLATE = ".github/PULL_REQUEST_TEMPLATE.md"


def report(name: str, title: str, body: str, tree: Path, commit: git.Commit) -> list[str]:
    lines = [
        f"### {name}: {title}",
        "",
        f"{len(body)} characters (aim {AIMS[name]}, GitHub's limit {BODY_LIMIT}).",
        "",
    ]
    lines += ["| rule (where) | the body's line that meets it |", "| --- | --- |"]
    body_lines = [title, *body.splitlines()]
    for where, rule, matcher in requirements(tree):
        hit = next((x for x in body_lines if matcher(x)), None)
        said = _cell(hit) if hit is not None else "NOT MET"
        if (
            hit is not None
            and rule.startswith("The submitting human must")
            and ("did not run the checks myself" in hit or "no record shows a person" in hit)
        ):
            said = "PARTLY (read: yes; no record of the person running the tests): " + said
        lines.append(f"| {_cell(rule)} ({where}) | {said} |")
    tags = re.match(r"^(\[[^\]]+\])+ ", title)
    lines.append(
        "| PR titles must start with one or more bracketed tags (docs/contributing/README.md) "
        f"| {_cell(title) if tags else 'NOT MET'} |"
    )
    trailer = [
        x for x in commit.message.splitlines() if x.startswith(("Co-authored-by", "Signed-off-by"))
    ]
    lines.append(
        "| Commits must include a `Signed-off-by:` header; mark commits with `Co-authored-by:` "
        f"(docs/contributing/README.md, AGENTS.md) | {_cell(' / '.join(trailer))} |"
    )
    return lines


def _cell(text: str) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= 400 else flat[:397] + "..."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--enable", type=Path)
    parser.add_argument("--interface", type=Path)
    parser.add_argument("--wrapper", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    given = {"enable": args.enable, "interface": args.interface, "wrapper": args.wrapper}
    plans = {name: path for name, path in given.items() if path is not None}
    if not plans:
        parser.error("give at least one of --enable, --interface, --wrapper")
    version = read_plan_dir(next(iter(plans.values()))).plan.vllm_version or "0.34.0"
    tree = release_tree(version)
    issues = {n: f"issue #{n}" for p in plans.values() for n in read_plan_dir(p).plan.issues}
    paths = {
        "enable": publish_as_submitter,
        "interface": approve_on_the_dashboard,
        "wrapper": request_then_tick,
    }
    out_lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bot-bodies-") as tmp:
        root = Path(tmp)
        with standin(root, tree, issues) as server:
            for name, plan_dir in plans.items():
                copy = _copy(plan_dir, root, name)
                body, shown = paths[name](copy, root / name)
                planned = read_plan_dir(copy)
                if name == "enable":
                    assert f"{body}--- end of the body (body sha256 {body_sha(body)})" in shown
                (args.out / f"{name}.md").write_text(f"{planned.pr_title}\n\n{body}")
                assert len(body) <= BODY_LIMIT
                fork = git.Repo(server.state.repos[FORK].git_dir)
                commit = fork.commit(f"refs/heads/{planned.plan.branch}")
                digest = patch_hash(planned.patch).removeprefix("sha256:")[:12]
                assert f"`sha256:{digest}`" in body, name
                out_lines += report(name, planned.pr_title, body, tree, commit) + [""]
                print(f"{name}: {len(body)} characters, PR posted")
    text = "\n".join(out_lines)
    (args.out / "requirements.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
