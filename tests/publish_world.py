"""A small upstream world to publish into, fast enough for scenario tests.

A synthetic vLLM-shaped tree (tests/synthetic.py) with four interface gaps, each reported in an
issue: Foo, Bar and Baz have no public draft (no GPU test), Qwen3 has one (its plan adds the test
registry's entry, so its patch asks for a GPU run). The GitHub stand-in serves the upstream and
the submitter's fork as bare git repositories, and a clone of the upstream is the checkout plans
are made from. Plans are made the real way (`bot propose`, `bot verify --gpu skip` without a
token); publishing runs the real `bot` command in a subprocess, as a user or the Action would.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import git

from bot import pipeline
from bot.cli import main
from bot.github.identity import fix_key, plan_fingerprint_in
from bot.plan import read_plan_dir
from bot.recipes.cases import SyntheticTree
from bot.recipes.eagle3_interface import cases as interface_cases
from bot.verify import VerifyOptions, verify_plan
from tests.conftest import FORK, UPSTREAM
from tests.github_standin import STANDIN_BOT_LOGIN, STANDIN_TOKEN, GitHubStandIn
from tests.test_recipe_cases import IDENTITY, build

# Class -> the issue that reports it. Qwen3's plan asks for a GPU test; the others do not.
ISSUES = {"Foo": 101, "Bar": 102, "Baz": 103, "Qwen3": 104}


def world_tree() -> SyntheticTree:
    """Foo, Bar, Baz (no public draft) and Qwen3 (a public draft: a test registry entry)."""
    foo = interface_cases.GAP.tree
    files = dict(foo.files)
    registry = {name: dict(entries) for name, entries in foo.registry.items()}
    for name in ("Bar", "Baz"):
        low = name.lower()
        files |= {p.replace("foo", low): t.replace("Foo", name) for p, t in foo.files.items()}
        registry[interface_cases.TEXT][f"{name}ForCausalLM"] = (low, f"{name}ForCausalLM")
    qwen3 = interface_cases.qwen3_tree()
    files |= qwen3.files
    registry[interface_cases.TEXT] |= qwen3.registry[interface_cases.TEXT]
    return SyntheticTree(files, registry)


def new_gap(name: str, checkout: Path) -> dict[str, str]:
    """The files that add one more interface gap ``name`` (Foo's shape) to the checkout: its
    model, its package test and its registry line."""
    foo = interface_cases.GAP.tree
    low = name.lower()
    files = {p.replace("foo", low): t.replace("Foo", name) for p, t in foo.files.items()}
    registry = checkout / "vllm/model_executor/models/registry.py"
    line = '    "FooForCausalLM": ("foo", "FooForCausalLM"),\n'
    text = registry.read_text()
    assert line in text
    added = line.replace("Foo", name).replace('"foo"', f'"{low}"')
    files[str(registry.relative_to(checkout))] = text.replace(line, line + added)
    return files


def build_world_base(root: Path) -> Path:
    return build(world_tree(), root)


def issue_json(name: str) -> dict[str, Any]:
    number = ISSUES[name]
    return {
        "number": number,
        "title": f"[Bug]: EAGLE-3 with {name}ForCausalLM fails",
        "body": (
            f"Serving {name}ForCausalLM with an EAGLE-3 draft fails at load time:\n\n"
            f"ValueError: {name}ForCausalLM does not support EAGLE3 interface"
        ),
        "state": "open",
        "labels": [],
        "user": {"login": "reporter"},
        "comments": 0,
    }


@dataclass
class World:
    standin: GitHubStandIn
    root: Path
    checkout: Path
    env: dict[str, str] = field(default_factory=dict)

    # --- plans ---------------------------------------------------------------------------

    def plan(self, name: str, out: Path | None = None) -> Path:
        """The bot's plan for ``name``'s issue on the checkout's HEAD, verified without a
        token (the local checks; the CPU tests and smoke check need a release environment a
        synthetic tree has none of, and are recorded as not run)."""
        out = out or self.root / "plans" / name
        plan = pipeline.propose(self.checkout, out, issue=issue_json(name), upstream=UPSTREAM)
        assert plan.status == "ready", plan.reason
        verified = verify_plan(out, VerifyOptions(gpu="skip", journal=False, runtime=False))
        assert verified.local_passed, verified.message
        return out

    def base_of(self, plan_dir: Path) -> str:
        return read_plan_dir(plan_dir).plan.base_commit

    # --- the upstream moving ----------------------------------------------------------------

    def move_upstream(
        self, note: str = "upstream moved", files: dict[str, str] | None = None
    ) -> str:
        """One commit on the upstream's main (a line of news, and ``files`` if given), pulled
        into the checkout."""
        repo = git.Repo(self.checkout)
        path = self.checkout / "NEWS.md"
        path.write_text((path.read_text() if path.exists() else "") + note + "\n")
        for rel, text in (files or {}).items():
            (self.checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.checkout / rel).write_text(text)
        repo.git.add("--all")
        repo.git.commit("-q", "--no-gpg-sign", "-m", note, env=IDENTITY)
        repo.git.push("-q", "origin", "HEAD:refs/heads/main")
        sha = repo.head.commit.hexsha
        repo.close()
        return sha

    # --- what GitHub holds ----------------------------------------------------------------

    def pulls(self) -> list[dict[str, Any]]:
        return self.standin.pulls(UPSTREAM)

    def comments(self, name: str) -> list[dict[str, Any]]:
        return self.standin.comments(UPSTREAM, ISSUES[name])

    def fork(self) -> git.Repo:
        return git.Repo(self.standin.state.repos[FORK].git_dir)

    def fork_head(self, branch: str) -> git.Commit | None:
        try:
            return self.fork().commit(f"refs/heads/{branch}")
        except git.BadName:
            return None

    def delete_fork_branch(self, branch: str) -> None:
        self.fork().git.update_ref("-d", f"refs/heads/{branch}")

    def writes(self) -> list[dict[str, Any]]:
        return self.standin.writes()

    def fork_branches(self) -> dict[str, str]:
        return {head.name: head.commit.hexsha for head in self.fork().heads}

    # --- how every scenario ends --------------------------------------------------------------

    def assert_settled(self, *plans: Path) -> None:
        """Exactly one PR for each plan (found by the fix it is for, on any base), labelled,
        one comment of the bot's on each issue the plan resolves and none elsewhere; then a
        rerun of each plan's publish sends nothing (no request that writes, no push)."""
        pulls = self.pulls()
        keys = {fix_key(read_plan_dir(p).plan.fingerprint or "") for p in plans}
        assert len(pulls) == len(plans), [p["title"] for p in pulls]
        assert {fix_key(plan_fingerprint_in(p["body"] or "") or "") for p in pulls} == keys
        for pull in pulls:
            assert [label["name"] for label in pull["labels"]] == ["bot:eagle3"]
        resolved = {n for p in plans for n in read_plan_dir(p).plan.issues}
        for name, number in ISSUES.items():
            comments = self.comments(name)
            assert len(comments) == (number in resolved), (name, comments)
            assert all(c["user"]["login"] == STANDIN_BOT_LOGIN for c in comments)
        writes, branches = len(self.writes()), self.fork_branches()
        for plan in plans:
            again = self.run("publish", str(plan))
            assert again.returncode == 0 and again.stdout.startswith("unchanged:"), again
        assert len(self.writes()) == writes and self.fork_branches() == branches

    def assert_no_token_anywhere(self, *outputs: str) -> None:
        """The token in no output and no file the bot, the plans or the stand-in's remotes
        hold."""
        for text in outputs:
            assert STANDIN_TOKEN not in text
        for path in self.root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 5_000_000:
                assert STANDIN_TOKEN.encode() not in path.read_bytes(), path

    # --- the bot, as a user runs it ---------------------------------------------------------

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``bot ARGS`` in this process (the same code as the command, without the seconds a
        new interpreter takes to import it): exit code, stdout and stderr. ``bot publish`` is
        run as its submitter does (:meth:`attested`)."""
        args = self.attested(args)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
        return subprocess.CompletedProcess(["bot", *args], code, out.getvalue(), err.getvalue())

    def attested(self, args: tuple[str, ...], env: dict[str, str] | None = None) -> list[str]:
        """``bot publish PLAN`` as the submitter runs it: ``--preview`` first (the diff and
        the exact body), then ``--read-every-line --body-sha SHA`` of what they read. Where the
        preview fails, the command as given (it fails the same way and says why)."""
        command = next((a for a in args if not a.startswith("-")), None)
        if command != "publish" or {"--preview", "--read-every-line"} & set(args):
            return list(args)
        printed = io.StringIO()
        with (
            _environ({**self.env, **(env or {})}),
            contextlib.redirect_stdout(printed),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            code = main([*args, "--preview"])
        found = re.search(r"--body-sha ([0-9a-f]{64})", printed.getvalue())
        if code != 0 or found is None:
            return list(args)
        return [*args, "--read-every-line", "--body-sha", found[1]]

    def bot(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """``bot ARGS`` as its own process, as a user or the Action runs it."""
        args = tuple(self.attested(args, env))
        return subprocess.run(
            [sys.executable, "-m", "bot", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **self.env, **env},
            check=False,
            timeout=600,
        )

    def bot_async(self, *args: str, **env: str) -> subprocess.Popen[str]:
        args = tuple(self.attested(args, env))
        return subprocess.Popen(
            [sys.executable, "-m", "bot", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **self.env, **env},
        )


@contextlib.contextmanager
def _environ(changes: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def kill_in_flight(standin: GitHubStandIn, run: subprocess.Popen, method: str, path: str) -> None:
    """SIGKILL ``run`` once its request ``method`` ``path`` (a regex) reached the stand-in (held
    there by an injected timeout fault), a moment after the stand-in applied its effect."""
    try:
        deadline = time.monotonic() + 120
        while not any(
            r["method"] == method and re.search(path, r["path"]) for r in standin.request_log()
        ):
            assert run.poll() is None, "the run ended before making that request"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)  # let the stand-in apply the effect (a fault "after")
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.communicate()


def make_world(standin: GitHubStandIn, base: Path, root: Path, monkeypatch: Any) -> World:
    """The stand-in serving ``base`` as the upstream and the fork, the issues filed, and a
    checkout of the upstream to make plans from."""
    upstream_git = standin.add_repo(UPSTREAM, seed_from=base)
    fork_git = standin.add_repo(FORK, seed_from=base, fork_of=UPSTREAM)
    for name, number in ISSUES.items():
        issue = issue_json(name)
        standin.add_issue(UPSTREAM, number, issue["title"], issue["body"])
    checkout = root / "checkout"
    git.Repo.clone_from(str(upstream_git), str(checkout)).close()
    monkeypatch.setenv("BOT_FORK_URL", str(fork_git))
    monkeypatch.setenv("BOT_UPSTREAM_URL", str(upstream_git))
    assert os.environ["GITHUB_TOKEN"] == STANDIN_TOKEN
    return World(standin, root, checkout)
