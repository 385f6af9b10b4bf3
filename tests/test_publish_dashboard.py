"""Approving on the dashboard: a plan whose patch asks for no GPU test, and two at once.

Every 0.34.0 plan today adds no registry entry, so it lists no GPU test; its verification
(`bot verify --gpu skip`) was recorded as `failed`, and the dashboard could never offer it for
approval. A plan is approvable once its local checks (the recipe's required evidence among them)
passed and no GPU run failed; the PR it opens is a draft only while a GPU run its patch asks for
is unconfirmed. The real dashboard, served by uvicorn, publishes through the real publisher
against the GitHub stand-in; its approvals run in a thread pool, so two at once share the work
repository, which used to fail one of them with "Publishing failed".
"""

from __future__ import annotations

import threading

import httpx

from bot.dashboard.app import DashboardSettings, create_app
from bot.journal.store import FAILED, PR_OPEN, VERIFIED, Journal
from bot.plan import read_plan_dir
from tests.dashboard_seed import approve_form, serve_in_thread
from tests.publish_world import World


def _settings() -> DashboardSettings:
    return DashboardSettings(
        as_login="alice", maintainers=frozenset({"alice"}), secret_key="test-secret"
    )


def _approve(base: str, ids: list[int]) -> list[str]:
    """Each proposal approved in its own tab, all the clicks at the same moment; the pages
    the dashboard shows after."""
    tabs = [httpx.Client(base_url=base, timeout=300) for _ in ids]
    forms = [approve_form(tab.get(f"/proposals/{i}").text) for tab, i in zip(tabs, ids)]
    barrier = threading.Barrier(len(ids))
    pages: dict[int, str] = {}

    def click(tab: httpx.Client, number: int, form: dict[str, str]) -> None:
        barrier.wait()
        pages[number] = tab.post(
            f"/proposals/{number}/approve", data=form, follow_redirects=True
        ).text

    clicks = [
        threading.Thread(target=click, args=(tab, i, form))
        for tab, i, form in zip(tabs, ids, forms, strict=True)
    ]
    for thread in clicks:
        thread.start()
    for thread in clicks:
        thread.join()
    for tab in tabs:
        tab.close()
    return [pages[i] for i in ids]


def test_a_plan_without_a_gpu_test_is_approvable_and_opens_ready(world: World, tmp_path):
    journal = Journal(tmp_path / "journal.sqlite3")
    plan = world.plan("Foo")
    verified = read_plan_dir(plan).plan.verification
    assert verified is not None and verified.passed
    assert verified.message == "local checks passed; the patch asks for no GPU test"
    proposal = journal.record_proposal(plan)
    assert journal.proposal(proposal).state == VERIFIED

    with serve_in_thread(create_app(journal, _settings())) as base:
        (page,) = _approve(base, [proposal])

    assert "Approved and published" in page, page[-2000:]
    (pull,) = world.pulls()
    assert pull["draft"] is False
    assert "The patch asks for no GPU test" in pull["body"]
    (comment,) = world.comments("Foo")
    assert "ready for review" in comment["body"]
    assert journal.proposal(proposal).state == PR_OPEN


def test_a_plan_whose_patch_asks_for_a_gpu_test_opens_a_draft(world: World, tmp_path):
    journal = Journal(tmp_path / "journal.sqlite3")
    plan = world.plan("Qwen3")
    verified = read_plan_dir(plan).plan.verification
    assert verified is not None and not verified.passed and verified.local_passed
    proposal = journal.record_proposal(plan)
    assert journal.proposal(proposal).state == VERIFIED

    with serve_in_thread(create_app(journal, _settings())) as base:
        (page,) = _approve(base, [proposal])

    assert "Approved and published" in page, page[-2000:]
    (pull,) = world.pulls()
    assert pull["draft"] is True
    assert "no GPU run is recorded; the PR stays a draft until one passes" in pull["body"]
    assert "a draft until GPU verification passes" in world.comments("Qwen3")[0]["body"]


def test_a_failed_local_check_is_not_approvable(world: World, tmp_path):
    from bot.plan import update_plan
    from tests.claimed import claimed

    plan_dir = world.plan("Foo")
    plan = read_plan_dir(plan_dir).plan
    failed = [{"name": "ruff", "passed": False, "detail": "E999"}]
    plan.verification = claimed(plan.verification, local_passed=False, checks=failed)
    update_plan(plan_dir, plan)
    journal = Journal(tmp_path / "journal.sqlite3")
    assert journal.proposal(journal.record_proposal(plan_dir)).state == FAILED


def test_two_approvals_at_once_publish_both(world: World, tmp_path):
    journal = Journal(tmp_path / "journal.sqlite3")
    ids = [journal.record_proposal(world.plan(name)) for name in ("Foo", "Bar")]

    with serve_in_thread(create_app(journal, _settings())) as base:
        pages = _approve(base, ids)

    for page in pages:
        assert "Approved and published" in page and "Publishing failed" not in page, page[-2000:]
    assert len(world.pulls()) == 2
    assert len(world.comments("Foo")) == 1 and len(world.comments("Bar")) == 1
    assert [journal.proposal(i).state for i in ids] == [PR_OPEN, PR_OPEN]
