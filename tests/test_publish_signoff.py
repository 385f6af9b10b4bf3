"""A maintainer's approval signs the commit off as that maintainer, never as the operator.

A ``Signed-off-by`` is its signer's own statement (the DCO). The operator (B: the token's user,
``BOT_SUBMITTER_NAME``/``EMAIL``) runs the dashboard; maintainer A signs in with their own
GitHub token and approves. The commit the fork receives is authored and signed off by A, with
the name and address A confirmed on the form; B only commits and pushes it and opens the PR.
An approval without a name and address, or with an address GitHub does not tie to A (B's, say),
publishes nothing. The Action's ``publish`` environment approval works the same way, its
sign-off written in the approval comment. Real dashboard under uvicorn, real git, the GitHub
stand-in on 127.0.0.1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bot.content_hash import patch_hash
from bot.dashboard.app import DashboardSettings, create_app
from bot.journal.store import PR_OPEN, VERIFIED, Journal
from bot.plan import read_plan_dir
from tests.conftest import SUBMITTER_EMAIL, SUBMITTER_NAME
from tests.dashboard_seed import approve_form, csrf_from, serve_in_thread
from tests.github_standin import STANDIN_BOT_LOGIN
from tests.publish_world import World

A_LOGIN, A_NAME, A_EMAIL = "mara", "Mara Maintainer", "mara@maintainers.example"
A_TOKEN = "ghp_maintainer_mara_0123456789abcdef"


def _maintainer_a(world: World) -> None:
    """A's GitHub account: a token of their own, their name, a verified address."""
    world.standin.add_token(A_TOKEN, A_LOGIN)
    world.standin.add_user(A_LOGIN, A_NAME, emails=[(A_EMAIL, True), ("old@mara.example", False)])


@contextmanager
def _signed_in_as_a(journal: Journal, world: World) -> Iterator[httpx.Client]:
    """The operator's dashboard (their token in the environment), A signed in with A's token."""
    settings = DashboardSettings(
        maintainers=frozenset({A_LOGIN}), api_url=world.standin.api_url, secret_key="k"
    )
    with serve_in_thread(create_app(journal, settings)) as base:
        tab = httpx.Client(base_url=base, timeout=300)
        csrf = csrf_from(tab.get("/login").text)
        signed_in = tab.post(
            "/login", data={"csrf": csrf, "token": A_TOKEN}, follow_redirects=True
        ).text
        assert f"Signed in as {A_LOGIN}." in signed_in, signed_in[-1500:]
        try:
            yield tab
        finally:
            tab.close()


def _signoffs(message: str) -> list[str]:
    return [line for line in message.splitlines() if line.lower().startswith("signed-off-by:")]


def _commit_is_a_not_b(world: World, plan: Path) -> None:
    branch = read_plan_dir(plan).plan.branch
    head = world.fork_head(branch)
    assert head is not None, "nothing was pushed"
    assert (head.author.name, head.author.email) == (A_NAME, A_EMAIL)
    assert _signoffs(head.message) == [f"Signed-off-by: {A_NAME} <{A_EMAIL}>"]
    assert SUBMITTER_EMAIL not in head.message and SUBMITTER_NAME not in head.message
    # The operator's identity commits and pushes it: never the signer.
    assert (head.committer.name, head.committer.email) == (SUBMITTER_NAME, SUBMITTER_EMAIL)


def test_a_maintainer_who_approves_authors_and_signs_off_the_commit(world: World, tmp_path):
    _maintainer_a(world)
    plan = world.plan("Foo")
    journal = Journal(tmp_path / "journal.sqlite3")
    proposal = journal.record_proposal(plan)

    with _signed_in_as_a(journal, world) as tab:
        page = tab.get(f"/proposals/{proposal}").text
        form = approve_form(page, signoff=None)  # as GitHub's profile filled it in
        assert (form["signoff_name"], form["signoff_email"]) == (A_NAME, A_EMAIL)
        done = tab.post(f"/proposals/{proposal}/approve", data=form, follow_redirects=True).text

    assert "Approved and published" in done, done[-2000:]
    _commit_is_a_not_b(world, plan)
    (pull,) = world.pulls()
    assert pull["user"]["login"] == STANDIN_BOT_LOGIN  # the operator's token opened it
    digest = patch_hash(read_plan_dir(plan).patch)[7:19]
    assert (
        f"@{A_LOGIN} read every changed line of the patch (`sha256:{digest}`) and approved "
        "opening this PR (on the bot's review dashboard, after reading the diff and this body), "
        "and signed the commit off as its author (`Signed-off-by`, the DCO: their own "
        f"statement); the bot pushed it and opens this PR with @{STANDIN_BOT_LOGIN}'s token."
    ) in pull["body"]
    assert journal.proposal(proposal).state == PR_OPEN


def test_an_approval_signed_as_anyone_else_or_unsigned_publishes_nothing(world: World, tmp_path):
    _maintainer_a(world)
    plan = world.plan("Foo")
    journal = Journal(tmp_path / "journal.sqlite3")
    proposal = journal.record_proposal(plan)
    refusals = {
        # The operator's identity: the operator never signs another person's approval. The
        # form's login field is no way in either: the login is the session's.
        (SUBMITTER_NAME, SUBMITTER_EMAIL, STANDIN_BOT_LOGIN): (
            f"Publishing failed: {SUBMITTER_EMAIL} is not an address GitHub ties to @{A_LOGIN}"
        ),
        # An address A's account lists but GitHub never verified, and one it does not list.
        (A_NAME, "old@mara.example", ""): "is not an address GitHub ties to @mara",
        (A_NAME, "mara@elsewhere.example", ""): "is not an address GitHub ties to @mara",
        # No name, no address: nothing to sign off with.
        ("", "", ""): "Not approved: give the name and e-mail address you sign the commit off",
        (A_NAME, "", ""): "Not approved: give the name and e-mail address you sign the commit off",
        # A second trailer smuggled in through the name.
        (f"{A_NAME}\nSigned-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>", A_EMAIL, ""): (
            "Not approved: not a name to sign off with"
        ),
        (f"{A_NAME} <{SUBMITTER_EMAIL}>", A_EMAIL, ""): "Not approved: not a name to sign off with",
    }
    branches = world.fork_branches()

    with _signed_in_as_a(journal, world) as tab:
        page = tab.get(f"/proposals/{proposal}").text
        for (name, email, login), said in refusals.items():
            typed = {"signoff_name": name, "signoff_email": email}
            form = {**approve_form(page, signoff=typed), **({"login": login} if login else {})}
            done = tab.post(f"/proposals/{proposal}/approve", data=form, follow_redirects=True)
            assert said in done.text, (name, email, done.text[-1500:])
            assert "nothing was published" in done.text.lower() or "Not approved" in done.text
            assert journal.proposal(proposal).state == VERIFIED
        assert world.pulls() == [] and world.fork_branches() == branches
        assert not [w for w in world.writes() if w["method"] in ("POST", "PATCH", "PUT")]

        # The same maintainer, signing as themselves: published, theirs.
        done = tab.post(
            f"/proposals/{proposal}/approve", data=approve_form(page, signoff=None)
        ).status_code
    assert done == 303
    _commit_is_a_not_b(world, plan)


def _publish_in_actions(world: World, plan: Path) -> subprocess.CompletedProcess[str]:
    """`bot publish PLAN` as the Action's publish job runs it (no attestation flags)."""
    env = {
        **os.environ,
        **world.env,
        "GITHUB_ACTIONS": "true",
        "GITHUB_RUN_ID": "77",
        "BOT_REPO": "example/bot",
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", "publish", str(plan)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def test_in_actions_the_approver_signs_off_in_the_approval_comment(world: World):
    world.standin.add_repo("example/bot")
    world.standin.add_user(A_LOGIN, A_NAME, public_email=A_EMAIL)
    plan = world.plan("Foo")
    read = f"I read every changed line of {patch_hash(read_plan_dir(plan).patch)[:19]}"

    world.standin.approve_environment(77, A_LOGIN, comment=read)  # no sign-off
    unsigned = _publish_in_actions(world, plan)
    assert unsigned.returncode == 2, unsigned
    assert unsigned.stderr.strip().endswith(
        f"@{A_LOGIN} approved without the name and e-mail address they sign the commit off "
        "with: a `Signed-off-by` is its signer's own statement (DCO), and the operator never "
        "signs off another person's approval; nothing was published"
    ), unsigned.stderr
    assert len(unsigned.stderr.strip().splitlines()) == 1

    as_b = f"{read}\n\nSigned-off-by: {SUBMITTER_NAME} <{SUBMITTER_EMAIL}>"
    world.standin.state.approvals[77] = []
    world.standin.approve_environment(77, A_LOGIN, comment=as_b)
    forged = _publish_in_actions(world, plan)
    assert forged.returncode == 2 and "is not an address GitHub ties to @mara" in forged.stderr
    assert world.pulls() == [] and read_plan_dir(plan).plan.branch not in world.fork_branches()

    world.standin.state.approvals[77] = []
    world.standin.approve_environment(
        77, A_LOGIN, comment=f"{read}\nSigned-off-by: {A_NAME} <{A_EMAIL}>"
    )
    signed = _publish_in_actions(world, plan)
    assert signed.returncode == 0, signed.stderr
    _commit_is_a_not_b(world, plan)
    (pull,) = world.pulls()
    assert (
        "approving the `publish` environment of run 77), and signed the commit off"
        in (pull["body"])
    )
