"""Publish a plan: one pull request per fix, never a duplicate, plus one sticky issue comment.

Every step is safe to re-run. Earlier PRs are found by the hidden fingerprint marker in their
body, among all the bot's own PRs (by author, every page) and those from the plan's head
branch, so a PR opened under an older branch name (slug) is found too: an open one is updated
in place on its own branch (only when the body's hash changed), a closed unmerged one means a
maintainer said no (nothing is reopened), a merged one means there is nothing left to do. A
crash between the push and the PR leaves a pushed branch, which the next run reuses; a PR whose
create answer was lost is adopted and finished (label, comment, journal) like one just opened.

Caps (Renovate's prConcurrentLimit and prHourlyLimit, plus a per-run cap): open bot PRs and PRs
opened in the last hour are counted on GitHub, first as an early check and then again under
the fork's publish lock (:mod:`bot.publish.lock`) right before the create request, so runs
started together cannot all see room.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial, wraps
from pathlib import Path
from typing import Any

import git

from bot.config import GitHubSettings, github_settings
from bot.confinement import check_confined, check_member_confined
from bot.content_hash import patch_hash
from bot.duplicate_search import DuplicateSearch
from bot.errors import BotError
from bot.github.client import GitHubClient, PullRequestExists
from bot.github.git import (
    CommitInfo,
    CommitStep,
    base_files,
    default_work_dir,
    prepare_branch,
    push_branch,
    work_repo_lock,
)
from bot.github.identity import (
    BOT_BRANCH,
    body_sha_in,
    body_sha_marker,
    class_key,
    fingerprint_marker,
    fingerprints_in,
    fix_key,
    has_body_sha,
    identity_markers,
    is_identity_line,
    plan_fingerprint_in,
    status_marker,
)
from bot.gitrepo import Repo
from bot.markdown import inline
from bot.plan import (
    NEEDS_HUMAN,
    NEEDS_INFO,
    NOTHING_TO_FIX,
    READY,
    Member,
    Plan,
    PlanDir,
    read_plan_dir,
)
from bot.publish import attestation as attesting
from bot.publish import signoff
from bot.publish.attestation import Attestation, Attester, Preview, Signer
from bot.publish.checks import (
    check_approval,
    check_hashes,
    check_plan_fields,
    commit_message,
    commit_text,
    member_commit_messages,
)
from bot.publish.contrib_rules import (
    CONTRIBUTING,
    RULE_FILES,
    ContributionRules,
    quote,
    read_rules,
)
from bot.publish.contribution import Facts, refresh, require_recorded_results
from bot.publish.demand import dependents, inherited_demand, member_demand
from bot.publish.dependencies import waiting_for
from bot.publish.duplicates import keywords_of, run_search
from bot.publish.evidence import require_evidence
from bot.publish.gpu_evidence import (
    TestedCommit,
    confirmed,
    engine_checkpoints_of_patch,
    gpu_tests_of,
    smoke_target_of,
)
from bot.publish.lock import fork_lock
from bot.publish.published import PublishedPull, pulls_by_class
from bot.publish.tree_facts import docs_naming
from bot.recipes.base import Finding
from bot.tree.known_models import TEST_REGISTRY_PATH
from bot.verification import Check, GpuRun, Verification

PUBLISH_ENVIRONMENT = "publish"  # the Action's environment with required reviewers
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
# GitHub refuses a PR body longer than this (characters); the bot never sends one.
BODY_LIMIT = 65536


# What each publishing outcome says about the PR on GitHub, in the journal's words; the other
# outcomes (needs-info-commented, nothing-to-do, rate-limited) leave no PR behind.
PR_STATE_AFTER = {
    "opened": "open",
    "adopted": "open",
    "updated": "open",
    "unchanged": "open",
    "merged": "merged",
    "closed-by-maintainer": "closed",
}


@dataclass(frozen=True)
class PublishResult:
    action: str  # opened | adopted | updated | unchanged | closed-by-maintainer | merged |
    # needs-info-commented | nothing-to-do | rate-limited | waiting (for a core PR to merge)
    pr_number: int | None = None
    pr_url: str | None = None
    comment_url: str | None = None
    message: str = ""

    @property
    def pr_state(self) -> str | None:
        """``open``/``merged``/``closed`` for the journal, or None when there is no PR."""
        return PR_STATE_AFTER.get(self.action) if self.pr_number else None


class PublishBudget:
    """Renovate-style caps, one object per run (share it across every plan a run publishes):

    * ``BOT_MAX_PRS_PER_RUN``: PRs this object has let open;
    * the contributing guide's cap on a contributor's open PRs (``rules.open_pr_cap``, read
      from the tree: 6 in 0.34.0's ``docs/contributing/README.md``) and ``BOT_MAX_OPEN_PRS``,
      both counted over every open PR of the token's user (the submitter) upstream, the bot's
      or not;
    * ``BOT_MAX_PRS_PER_HOUR``: the upstream's PRs created in the last hour from the fork
      owner's branches or by the bot's login.

    Both GitHub counts are read from GitHub, never from a file (a file starts empty in every
    Actions run), and read again under the fork's publish lock right before a create
    (:meth:`claim`), so that concurrent runs cannot each count the same free slot.
    """

    def __init__(self, settings: GitHubSettings, client: GitHubClient | None = None) -> None:
        self.settings = settings
        self.client = client
        self.opened_this_run = 0
        self.rules: ContributionRules | None = None  # the tree's, once publish has read them

    def refusal(self) -> str | None:
        if self.opened_this_run >= self.settings.max_prs_per_run:
            return f"already opened {self.opened_this_run} PR(s) this run (BOT_MAX_PRS_PER_RUN)"
        client = self._client()
        upstream = self.settings.upstream
        if client.authenticated:
            open_now = len(client.own_pulls(upstream, state="open"))  # all of the user's
            cap = self.rules.open_pr_cap if self.rules is not None else None
            if cap is not None and open_now >= cap:
                return (
                    f"@{client.login} already has {open_now} open PRs in {upstream}, the cap "
                    f'{CONTRIBUTING} sets: "{self.rules.open_pr_cap_rule}"'  # type: ignore[union-attr]
                )
            if open_now >= self.settings.max_open_prs:
                return f"@{client.login} has {open_now} open PRs (BOT_MAX_OPEN_PRS)"
        since = datetime.now(UTC) - timedelta(hours=1)
        recent = client.pulls_created_since(
            since,
            head_owner=self.settings.fork_owner,
            author=client.login if client.authenticated else None,
            repo=upstream,
        )
        if len(recent) >= self.settings.max_prs_per_hour:
            return f"{len(recent)} PR(s) opened in the last hour (BOT_MAX_PRS_PER_HOUR)"
        return None

    @contextmanager
    def claim(self, work_dir: Path, fingerprint: str = "") -> Iterator[str | None]:
        """Hold the fork's publish lock and count again; yields a refusal, or None to go on.

        The lock is held while the caller creates its PR, and released after."""
        client = self._client()
        with fork_lock(
            work_dir, self.settings, may_wait=client.may_wait, fingerprint=fingerprint
        ) as held:
            if not held:
                yield (
                    "another run holds the fork's publish lock and BOT_GITHUB_MAX_WAIT is "
                    "spent waiting for it"
                )
            else:
                yield self.refusal()

    def record(self) -> None:
        self.opened_this_run += 1

    def _client(self) -> GitHubClient:
        if self.client is None:
            self.client = GitHubClient(self.settings)
        return self.client


def _one_at_a_time(publish: Callable[..., PublishResult]) -> Callable[..., PublishResult]:
    """``publish`` holding its work repository's lock (:func:`work_repo_lock`) throughout:
    the git work and what it reads from GitHub before it acts (earlier PRs, the caps) are one
    step for every publish sharing the repository, on every path (CLI, dashboard, Action)."""

    @wraps(publish)
    def locked(plan_dir: Path, **options: Any) -> PublishResult:
        settings = options.get("settings") or github_settings()
        work_dir = options.get("work_dir") or default_work_dir(settings)
        with work_repo_lock(work_dir):
            return publish(plan_dir, **{**options, "work_dir": work_dir})

    return locked


@_one_at_a_time
def publish_plan(
    plan_dir: Path,
    *,
    reviewer: str | None,
    client: GitHubClient | None = None,
    settings: GitHubSettings | None = None,
    work_dir: Path | None = None,
    budget: PublishBudget | None = None,
    approved_hash: str | None = None,
    expected_issue: int | None = None,
    attest: Attester | None = None,
    requested_by: str | None = None,
) -> PublishResult:
    """Publish ``plan_dir``; with ``approved_hash`` only if it is the ``review_hash`` of the
    patch.diff and pr.md on disk (what the maintainer saw).

    Nothing is pushed before ``attest`` (:mod:`bot.publish.attestation`) has answered, for the
    exact body that would be posted, with a person's attestation that they read every changed
    line of this patch; in GitHub Actions without one, the approval of the run's ``publish``
    environment is asked instead. The commit is authored and signed off by the person who
    attests (:mod:`bot.publish.signoff`): an approver's attestation, made beforehand, makes
    them its author and ``Signed-off-by``, never the operator. A new PR also needs demand
    (:func:`demand_of`; a maintainer's request is ``requested_by``) and room under the caps, the
    contributing guide's among them.
    """
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    check_approval(planned, approved_hash)  # before anything else is read from the plan
    if reviewer is not None:
        _checked_login(reviewer)  # the journal names them as the actor
    if plan.status in (NOTHING_TO_FIX, NEEDS_HUMAN):
        return PublishResult("nothing-to-do", message=f"nothing to publish: {plan.reason}")
    settings = settings or github_settings()
    # Nothing in the artifact is trusted: fields, hashes and (below) the tree are re-checked
    # before the first request that could write anything.
    check_plan_fields(planned, settings)
    if expected_issue is not None and plan.issue_number != expected_issue:
        raise BotError(
            f"the plan is for issue #{plan.issue_number}, not #{expected_issue} that this run "
            "was started for; refusing to publish it"
        )
    if plan.status == READY:
        check_hashes(planned, approved_hash)
        require_evidence(plan)  # the checks the plan's recipe requires (Recipe.required_checks)
        require_recorded_results(plan)
        settings = with_submitter(settings)
    client = client or GitHubClient(settings)
    if not client.authenticated:
        raise BotError("publishing needs a token: set GITHUB_TOKEN")
    if plan.status == NEEDS_INFO:
        return _ask_reporter(plan, client)
    title = (planned.pr_title or plan.title or "").strip()
    if not title or not plan.fingerprint:
        raise BotError("the plan has no PR title or fingerprint; re-run `bot propose`")
    if not settings.fork_owner:
        raise BotError("no fork configured: set BOT_FORK_OWNER")
    head = f"{settings.fork_owner}:{plan.branch}"
    marker = fingerprint_marker(plan.fingerprint)
    elsewhere = _members_elsewhere(client, plan)
    if elsewhere:
        return _already_elsewhere(plan, elsewhere)
    if plan.status == READY and (waiting := waiting_for(client, plan)) is not None:
        return PublishResult("waiting", message=f"not opening a PR yet: {waiting}")
    earlier = _earlier_pulls(client, head, plan.upstream, plan.fingerprint)
    merged = [p for p in earlier if p.get("merged") or p.get("merged_at")]
    if merged:
        return _result("merged", merged[0], f"PR #{merged[0]['number']} was merged already")
    open_pulls = [p for p in earlier if p["state"] == "open"]
    if not open_pulls and earlier:
        closed = earlier[0]
        message = (
            f"PR #{closed['number']} was closed without merging: a maintainer said no, "
            "so nothing is reopened"
        )
        return _result("closed-by-maintainer", closed, message)
    inherited = inherited_demand(plan) if plan.status == READY else []
    if not open_pulls:
        demand = demand_of(plan, requested_by, inherited)
        if not demand:
            return PublishResult("waiting-for-demand", message=no_demand_message(plan))
    work_dir = work_dir or default_work_dir(settings)
    files = base_files(plan, RULE_FILES, work_dir, settings)
    rules = read_rules(files.get)
    budget = budget or PublishBudget(settings, client)
    budget.rules = rules
    if not open_pulls:
        refusal = budget.refusal()
        if refusal:
            return PublishResult("rate-limited", message=f"not opening a PR now: {refusal}")
    # AGENTS.md's duplicate-work checks, before anything is pushed: a class another open or
    # merged PR covers fails closed, named with that PR.
    ours = [marker, *(fingerprint_marker(f) for f in plan.member_fingerprints)]
    # Our own open PR for this fix, made on an older base, names its fingerprints of then.
    ours += [fingerprint_marker(f) for p in open_pulls for f in fingerprints_in(p["body"] or "")]
    search = _search(client, plan, ours, rules)
    _refuse_covered(plan, search, rules)
    submitter = _checked_login(client.login)
    credit = _credit(rules)
    digest = patch_hash(planned.patch)
    if attest is None:
        attest = attesting.given(_environment_attestation(client, settings, digest))
    # An approver's attestation, made beforehand, makes the commit theirs (author and
    # Signed-off-by); the operator's identity only commits it.
    signer = signoff.signer_of(attesting.in_advance(attest), client, settings)
    # An earlier PR keeps its own branch, which may carry an older slug of the class name.
    branch_plan = _on_branch_of(plan, open_pulls[0], settings) if open_pulls else plan
    commit = prepare_branch(
        branch_plan,
        planned.patch,
        work_dir,
        settings,
        message=commit_message(planned, signer.name, signer.email, credit),
        check_tree=lambda changes: check_confined(planned, changes),
        steps=_member_commits(planned, signer, credit) if plan.is_group else None,
        author=(signer.name, signer.email),
    )
    if commit.human_edited and not open_pulls:
        # Its commits are not ours and were never checked: a PR from it would propose them.
        raise BotError(
            f"the fork's branch {plan.branch} already holds commits the bot did not make and "
            "no open PR of ours uses it; refusing to open a PR from it (delete the branch to "
            "let the bot start it afresh)"
        )
    tested = _tested_commit(plan, commit, work_dir)
    verified = _verified(plan, client, settings, tested)
    names = [n for m in plan.members for n in (m.class_name, *_archs(m.finding))]
    facts = Facts(
        plan=plan,
        patch=planned.patch,
        rules=rules,
        search=search,
        submitter=submitter,
        submitter_identity=f"{settings.git_name} <{settings.git_email}>",
        authors=_authors(commit, work_dir, settings),
        verified=verified,
        docs=docs_naming(work_dir, plan.base_commit, names),
        inherited=tuple(inherited),
    )

    def body_for(who: Attestation) -> str:
        return compose_body(planned, title, dataclasses.replace(facts, attestation=who))

    preview = Preview(planned.patch, digest, submitter, body_for, title)
    attestation = attest(preview)
    if attestation is None:
        return PublishResult(
            "not-attested",
            message="not published: nobody attested reading every changed line of this patch",
        )
    body = body_for(attestation)
    attesting.require(attestation, digest, body)
    signoff.check_signed_by(attestation, signer, settings)
    if attestation.body_sha is None:
        # No body was shown on this path (the dashboard shows pr.md, the Action its
        # artifact): what was reviewed is pr.md's records, the duplicate search among them; a
        # search that now answers otherwise changes the body: ask again. (The GPU verdict is
        # publish's own, stated only as far as GitHub confirms it.)
        reviewed = compose_body(
            planned,
            title,
            dataclasses.replace(facts, attestation=attestation, search=plan.duplicate_search),
        )
        _same_as_reviewed(reviewed, body, attestation)
    if len(body) > BODY_LIMIT:
        raise BotError(
            f"the PR body is {len(body)} characters and GitHub accepts at most {BODY_LIMIT}; "
            "nothing was pushed (a group: plan fewer classes with --max-group-size)"
        )
    pushed = push_branch(commit, work_dir, settings)
    if open_pulls:
        return _update(client, settings, plan, open_pulls[0], title, body, commit, pushed, tested)
    with budget.claim(work_dir, plan.fingerprint) as refusal:
        if refusal:
            return PublishResult("rate-limited", message=f"not opening a PR now: {refusal}")
        try:
            pull, adopted = client.create_pull(
                title=title,
                body=body,
                head=head,
                base=client.default_branch(plan.upstream),
                draft=not verified,
                marker=marker,
                repo=plan.upstream,
            )
        except PullRequestExists:
            # Opened by a run that died before it could report (or without our marker).
            again = _earlier_pulls(client, head, plan.upstream)
            open_now = [p for p in again if p["state"] == "open"]
            if not open_now:
                raise
            return _update(
                client, settings, plan, open_now[0], title, body, commit, pushed, tested, True
            )
        budget.record()
    if adopted:
        return _update(client, settings, plan, pull, title, body, commit, pushed, tested, True)
    labelled = client.add_labels(pull["number"], [settings.label], repo=plan.upstream)
    comment_url, _ = _comment_on_issue(client, plan, pull)
    note = "" if labelled else f" (could not add label {settings.label!r})"
    draft = " as a draft" if pull.get("draft") else ""
    return _result("opened", pull, f"opened PR #{pull['number']}{draft}{note}", comment_url)


def _same_as_reviewed(reviewed: str, body: str, attestation: Attestation) -> None:
    if reviewed == body:
        return
    old, new = reviewed.split("\n"), body.split("\n")
    at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    line = new[at] if at is not None else ""
    raise BotError(
        f"the body would differ from the one @{attestation.login} reviewed (now: "
        f"{line[:120]!r}): a publish-time fact changed; re-run `bot propose` and review it "
        "again. Nothing was published"
    )


def demand_of(
    plan: Plan, requested_by: str | None = None, inherited: Sequence[str] = ()
) -> list[str]:
    """Why a PR for ``plan`` is wanted, one line per signal: a triaged issue it fixes, a public
    draft checkpoint its registry entry tests with, a maintainer's request ticked on the
    dashboard issue, and (a core plan) the demand of the plans that build on it
    (``inherited``, :func:`bot.publish.demand.inherited_demand`). Empty: nobody asked, and the
    plan waits on the dashboard issue."""
    lines = [f"issue #{n}" for n in plan.issues]
    for name, member_lines in member_demand(plan):
        lines += [f"{line} for {name}" for line in member_lines if line.startswith("public draft")]
    if requested_by:
        lines.append(f"requested by @{_checked_login(requested_by)} on the dashboard issue")
    return list(dict.fromkeys([*lines, *inherited]))


def no_demand_message(plan: Plan) -> str:
    what = f"group {plan.group}" if plan.is_group else str(plan.class_name)
    builds = " nor for a plan that builds on it" if dependents(plan) else ""
    return (
        f"not opening a PR for {what}: nobody asked for it{builds} (no triaged issue, no "
        "public draft checkpoint, no maintainer's request); it waits on the dashboard issue as "
        "a requestable item (`bot sync`)"
    )


def _archs(finding: Finding) -> list[str]:
    return list(finding.architectures)


def _search(
    client: GitHubClient, plan: Plan, markers: list[str], rules: ContributionRules
) -> DuplicateSearch:
    keywords = [keywords_of(m.class_name, m.finding.path, m.issues) for m in plan.members]
    if not keywords:
        keywords = [keywords_of(str(plan.class_name), "", plan.issues)]
    return run_search(client, plan.upstream, keywords, markers, rules.duplicate_checks)


def _refuse_covered(plan: Plan, search: DuplicateSearch, rules: ContributionRules) -> None:
    """Fail closed on a class another open or merged PR covers, naming both."""
    covered = [
        (m.class_name, pull)
        for m in plan.members
        if (pull := search.covering(m.class_name)) is not None
    ]
    if not covered:
        return
    listed = "; ".join(
        f"{name} is covered by PR #{pull.number} ({pull.state}: {pull.why})"
        for name, pull in covered
    )
    rule = quote("If an open PR already addresses the same fix, do not open another.")
    again = (
        f" Re-run `bot propose --group {plan.group}` to plan the group without them."
        if plan.is_group
        else ""
    )
    raise BotError(f"{listed}; {rule} Nothing was published.{again}")


def _member_commits(planned: PlanDir, signer: Signer, credit: str | None) -> list[CommitStep]:
    """A group's branch: one commit per member, each checked by its own recipe's rules."""
    messages = member_commit_messages(planned, signer.name, signer.email, credit)
    return [
        CommitStep(member.patch, message, partial(check_member_confined, member))
        for member, message in zip(planned.plan.members, messages, strict=True)
    ]


def _members_elsewhere(client: GitHubClient, plan: Plan) -> list[tuple[Member, PublishedPull]]:
    """Members whose class another PR already names: for a group, any PR but its own; for a
    single class, a group PR (its own earlier PRs are found by :func:`_earlier_pulls`)."""
    by_class = pulls_by_class(client, plan.upstream)
    found = []
    for member in plan.members:
        for pull in by_class.get(class_key(member.fingerprint) or "", []):
            if plan.is_group and fix_key(pull.plan_fingerprint or "") != fix_key(plan.fingerprint):
                found.append((member, pull))
                break
            if not plan.is_group and pull.is_group:
                found.append((member, pull))
                break
    return found


def _already_elsewhere(plan: Plan, elsewhere: list[tuple[Member, PublishedPull]]) -> PublishResult:
    listed = "; ".join(
        f"{member.class_name} is already in PR #{pull.number} ({pull.describe()})"
        for member, pull in elsewhere
    )
    if not plan.is_group:
        return PublishResult("nothing-to-do", message=f"nothing to publish: {listed}")
    raise BotError(
        f"not opening the group PR: {listed}; re-run `bot propose --group {plan.group}` to plan "
        "the group without it"
    )


def _on_branch_of(plan: Plan, pull: dict[str, Any], settings: GitHubSettings) -> Plan:
    """The plan, aimed at the branch ``pull`` comes from when that is a bot branch of ours."""
    head = pull.get("head") or {}
    owner = ((head.get("repo") or {}).get("owner") or {}).get("login")
    ref = str(head.get("ref") or "")
    if owner == settings.fork_owner and BOT_BRANCH.match(ref) and ref != plan.branch:
        return dataclasses.replace(plan, branch=ref)
    return plan


def with_submitter(settings: GitHubSettings) -> GitHubSettings:
    """The settings with the human submitter as the commit identity; without one configured,
    a one-line refusal saying what to set (nothing is published)."""
    if not settings.submitter_name or not settings.submitter_email:
        raise BotError(
            "no human submitter configured: set BOT_SUBMITTER_NAME and BOT_SUBMITTER_EMAIL "
            "(the person who reviewed the change and opens the PR) and GITHUB_TOKEN to their "
            'own token (vLLM\'s AGENTS.md: "Pure code-agent PRs are not allowed"); '
            "nothing was published"
        )
    return dataclasses.replace(
        settings, git_name=settings.submitter_name, git_email=settings.submitter_email
    )


def _credit(rules: ContributionRules) -> str | None:
    """The bot's credit trailer in the form the tree's AGENTS.md shows (name only)."""
    if not rules.attribution_trailer:
        return None
    bot_name = os.environ.get("BOT_GIT_NAME") or "vllm-eagle3-bot"
    return f"{rules.attribution_trailer}: {commit_text(bot_name, 'BOT_GIT_NAME', limit=100)}"


def _environment_attestation(
    client: GitHubClient, settings: GitHubSettings, digest: str
) -> Attestation | None:
    """In GitHub Actions: the required reviewer who approved this run's ``publish``
    environment, as GitHub records the approval, when its comment says they read every
    changed line of this patch (:func:`bot.publish.attestation.from_approval_comment`)."""
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if os.environ.get("GITHUB_ACTIONS") != "true" or not run_id.isdigit() or not settings.bot_repo:
        return None
    try:
        approvals = client.run_approvals(settings.bot_repo, int(run_id))
    except BotError:
        return None
    for approval in approvals:
        names = {str((e or {}).get("name")) for e in approval.get("environments") or []}
        login = str((approval.get("user") or {}).get("login") or "")
        if approval.get("state") == "approved" and PUBLISH_ENVIRONMENT in names and login:
            via = f"approving the `{PUBLISH_ENVIRONMENT}` environment of run {int(run_id)}"
            found = attesting.from_approval_comment(
                _checked_login(login), str(approval.get("comment") or ""), via, digest
            )
            if found is not None:
                return found
    raise BotError(
        f"no approval of run {int(run_id)}'s `{PUBLISH_ENVIRONMENT}` environment says "
        f'"read every changed line" of {digest[:19]}: approve it with that comment (and your '
        "own `Signed-off-by: Name <email>` line); nothing was published"
    )


def _checked_login(login: str) -> str:
    if not _LOGIN.match(login):
        raise BotError(f"not a GitHub login: {login!r}")
    return login


def compose_body(planned: PlanDir, title: str, facts: Facts) -> str:
    """The PR body, a pure function of its records: pr.md's recipe text (checked at publish:
    no links but to the upstream, no images, no HTML), the generic blocks rendered from
    ``facts`` (:func:`bot.publish.contribution.refresh`), then the fingerprint markers and the
    body's hash. The same records give the same bytes.

    The hash marker digests what the body says: the body the same records compose with their
    figures left out (each check's and the GPU run's outcome, not their details, durations,
    logs or the time). A verification run again on the same patch with the same outcomes (the
    Action's rerun, which verifies afresh) therefore leaves the hash as it was, and the PR is
    not edited for a changed duration."""
    text = _body_text(planned, facts)
    outcomes = _outcomes_only(planned.plan)
    said = _body_text(
        dataclasses.replace(planned, plan=outcomes), dataclasses.replace(facts, plan=outcomes)
    )
    digest = hashlib.sha256(f"{title}\0{said}".encode()).hexdigest()[:16]
    return f"{text}\n{body_sha_marker(digest)}\n"


def _outcomes_only(plan: Plan) -> Plan:
    """The plan with its verification reduced to what it concluded, check by check (and who
    ran it: the body says so)."""
    recorded = plan.verification
    if recorded is None:
        return plan
    gpu = recorded.gpu
    outcomes = Verification(
        passed=recorded.passed,
        local_passed=recorded.local_passed,
        message="",
        # Each CPU test case's outcome stays: a group's claims say which members they back.
        checks=tuple(Check(c.name, c.passed, "", record=_cases_only(c)) for c in recorded.checks),
        gpu=None if gpu is None else GpuRun(gpu.mode, gpu.conclusion),
        patch_hash=recorded.patch_hash,
        ran_by=recorded.ran_by,
    )
    return dataclasses.replace(plan, verification=outcomes)


def _cases_only(check: Check) -> dict[str, Any] | None:
    record = check.record or {}
    kept = {k: record[k] for k in ("cases", "blocked") if k in record}
    return kept or None


def _body_text(planned: PlanDir, facts: Facts) -> str:
    plan = planned.plan
    # The GPU verdict is publish's own (a run GitHub confirms, ``facts.verified``), not the
    # artifact's word: the results block states a recorded success only when confirmed.
    body = refresh(planned.pr_body, facts)
    lines = [
        line
        for line in body.rstrip().split("\n")
        if not is_identity_line(line) and not has_body_sha(line)
    ]
    if plan.issue_number and f"#{plan.issue_number}" not in body:
        lines += ["", f"Fixes #{plan.issue_number}"]
    lines += ["", *identity_markers(plan.fingerprint or "", plan.member_fingerprints)]
    return "\n".join(lines)


def _earlier_pulls(
    client: GitHubClient, head: str, upstream: str, fingerprint: str | None = None
) -> list[dict[str, Any]]:
    """The bot's own earlier PRs for this fix (any state, newest first): from our head branch,
    or opened by the token's login on any branch, whose body was published for the same fix
    on any base commit (:func:`fix_key`: the same recipe and class, or the same group of
    members). The upstream moving does not make a fix another one: a PR closed unmerged
    stays a "no", and our own open PR is the one to refresh. With ``fingerprint`` None, every
    PR from the head."""
    pulls = {p["number"]: p for p in client.find_pulls(head, repo=upstream)}
    if fingerprint is not None:
        wanted = fix_key(fingerprint)
        pulls = {n: p for n, p in pulls.items() if _for_fix(p, wanted)}
        for item in client.own_pulls(upstream):
            if item["number"] not in pulls and _for_fix(item, wanted):
                pulls[item["number"]] = client.get_pull(item["number"], repo=upstream)
    return sorted(pulls.values(), key=lambda p: p["number"], reverse=True)


def _for_fix(pull: dict[str, Any], wanted: str | None) -> bool:
    published = plan_fingerprint_in(pull.get("body") or "")
    return wanted is not None and published is not None and fix_key(published) == wanted


def _update(
    client: GitHubClient,
    settings: GitHubSettings,
    plan: Plan,
    pull: dict[str, Any],
    title: str,
    body: str,
    commit: CommitInfo,
    pushed: bool,
    tested: TestedCommit,
    adopted: bool = False,
) -> PublishResult:
    """Bring an open PR of ours up to date: body, readiness (both ways), label, the comment."""
    changes: list[str] = []
    if adopted:
        changes.append("adopted it (GitHub had opened it; the answer to that was lost)")
    if pushed:
        changes.append("pushed a new commit")
    if body_sha_in(pull.get("body") or "") != body_sha_in(body) or pull.get("title") != title:
        pull = client.edit_pull(pull["number"], title=title, body=body, repo=plan.upstream)
        changes.append("updated title/body")
    verified = _verified(plan, client, settings, tested)
    if pull.get("draft") and verified:
        client.mark_ready_for_review(pull["number"], repo=plan.upstream)
        pull = client.get_pull(pull["number"], repo=plan.upstream)
        changes.append("marked ready for review")
    elif not pull.get("draft") and not verified:
        # No GPU run GitHub confirms for this commit (or a later one failed or was cancelled).
        client.convert_to_draft(pull["number"], repo=plan.upstream)
        pull = client.get_pull(pull["number"], repo=plan.upstream)
        changes.append("marked as a draft again: no passed GPU run of this commit")
    labels = {str(label.get("name")) for label in pull.get("labels") or []}
    if settings.label not in labels:
        if client.add_labels(pull["number"], [settings.label], repo=plan.upstream):
            changes.append(f"added label {settings.label}")
        else:
            changes.append(f"could not add label {settings.label!r}")
    comment_url, commented = _comment_on_issue(client, plan, pull)
    if commented in ("created", "updated"):
        where = "the members' issues" if plan.is_group else f"#{plan.issue_number}"
        changes.append(f"{commented} the comment on {where}")
    if commit.human_edited:
        changes.append("left the branch alone: someone else has committed to it")
    changed = pushed or any(
        c.startswith(("updated", "marked", "added", "created")) for c in changes
    )
    action = "adopted" if adopted else "updated" if changed else "unchanged"
    message = f"PR #{pull['number']}: " + ("; ".join(changes) if changes else "already up to date")
    return _result(action, pull, message, comment_url)


def _comment_on_issue(
    client: GitHubClient, plan: Plan, pull: dict[str, Any]
) -> tuple[str | None, str]:
    """The sticky comment's URL and what was done to it (created/updated/unchanged/none)."""
    state = "a draft until GPU verification passes" if pull.get("draft") else "ready for review"
    results: list[tuple[str | None, str]] = []
    for number, wording in _issue_wordings(plan):
        what = f"#{pull['number']}"
        if plan.is_group:
            what += f" (one PR for {len(plan.members)} model classes with the same fix)"
        body = (
            f"{status_marker(number)}\nA fix is proposed in {what}: {wording} The PR is {state}.\n"
        )
        results.append(
            client.upsert_issue_comment(number, status_marker(number), body, repo=plan.upstream)
        )
    if not results:
        return None, "none"
    changed = [r for r in results if r[1] in ("created", "updated")]
    return (changed or results)[0]


def _issue_wordings(plan: Plan) -> list[tuple[int, str]]:
    """Each triaged issue the plan resolves, with its member's sentence (a single plan: its
    own issue and sentence)."""
    if not plan.is_group:
        return [(plan.issue_number, _fix_wording(plan))] if plan.issue_number else []
    wordings: dict[int, str] = {}
    for member in plan.members:
        for number in member.issues:
            wordings.setdefault(number, _fix_wording(member))
    return sorted(wordings.items())


# What a recipe's sentence is made of: words, code spans, punctuation. No link, image, HTML,
# mention or line break can be spelled with these.
_PLAIN_SENTENCE = re.compile(r"[\w `.,;:'()+-]+")


def _fix_wording(plan: Plan | Member) -> str:
    """The recipe's sentence from the plan; one line, no HTML, no mentions, else a plain one."""
    wording = (plan.issue_comment or "").strip()
    plain = _PLAIN_SENTENCE.fullmatch(wording) and "www." not in wording.lower()  # autolinked
    if not wording or len(wording) > 300 or not plain:
        subject = html.escape(plan.class_name or "the model class")
        return f"it changes `{subject}`."
    return wording


def _ask_reporter(plan: Plan, client: GitHubClient) -> PublishResult:
    if not plan.issue_number:
        raise BotError("a needs-info plan without an issue number has nobody to ask")
    if not plan.questions:
        raise BotError("a needs-info plan needs at least one question")
    # Questions may quote the issue: escaped so they render as text, never as markup.
    asked = "\n".join(f"- {inline(q)}" for q in plan.questions)
    body = (
        f"{status_marker(plan.issue_number)}\n"
        "Thanks for the report. Before proposing a fix, the bot needs a little more "
        f"information:\n\n{asked}\n"
    )
    url, what = client.upsert_issue_comment(
        plan.issue_number, status_marker(plan.issue_number), body, repo=plan.upstream
    )
    return PublishResult(
        "needs-info-commented", comment_url=url, message=f"question comment {what}"
    )


def _result(
    action: str, pull: dict[str, Any], message: str, comment_url: str | None = None
) -> PublishResult:
    return PublishResult(action, pull["number"], pull.get("html_url"), comment_url, message)


def _verified(
    plan: Plan, client: GitHubClient, settings: GitHubSettings, tested: TestedCommit
) -> bool:
    """Verification passed, on a GPU run GitHub confirms: the plan directory is no witness of
    its own (an artifact can say ``passed`` and name any green run), so a PR leaves draft only
    when GitHub shows the bot repository's gpu-verify run of this very commit, with the tests
    and smoke target re-derived here, made after the commit, passed, and not followed by a
    failed or cancelled one (:mod:`bot.publish.gpu_evidence`). A local GPU run is the operator's
    word, taken only outside GitHub Actions (where the plan comes from another job, which ran no GPU
    test). A patch that adds no registry entry asks for no GPU test (``tested.gpu_tests``,
    re-derived from the pushed commit): once the checks its recipe requires passed (publish
    refuses a plan without them), there is no run to wait for."""
    verification = plan.verification
    if verification is not None and not tested.gpu_tests:
        return verification.approvable
    gpu = verification.gpu if verification else None
    if verification is None or not verification.passed or gpu is None:
        return False
    if gpu.mode == "local":
        return os.environ.get("GITHUB_ACTIONS") != "true"
    if gpu.mode != "dispatch" or not settings.bot_repo:
        return False
    return confirmed(gpu.to_json(), tested, client, settings.bot_repo)


def _authors(commit: CommitInfo, work_dir: Path, settings: GitHubSettings) -> tuple[str, ...]:
    """Who authored (and signed off) each of the bot's commits on the branch as it will be
    pushed: from its head down to the first commit the operator's identity did not commit."""
    if commit.human_edited:
        return ()
    found = []
    with Repo(work_dir) as repo:
        head = repo.commit(commit.sha)
        while head.committer.email == settings.git_email and len(found) < 64:
            found.append(f"{head.author.name} <{head.author.email}>")
            if len(head.parents) != 1:
                break
            head = head.parents[0]
    return tuple(found)


def _tested_commit(plan: Plan, commit: CommitInfo, work_dir: Path) -> TestedCommit:
    """What a GPU run must have tested, from the pushed commit and the checked edits."""
    registry = TEST_REGISTRY_PATH if any(e.path == TEST_REGISTRY_PATH for e in plan.edits) else None
    with Repo(work_dir) as repo:
        head = repo.commit(commit.sha)
        parent = head.parents[0].hexsha if head.parents else ""

        def text(rev: str) -> str | None:
            try:
                return repo.git.show(f"{rev}:{registry}") if registry else None
            except git.GitCommandError:
                return None

        before, after = (text(parent), text(commit.sha)) if parent else (None, None)
        return TestedCommit(
            head=commit.sha,
            first_parent=parent,
            made_at=datetime.fromtimestamp(head.committed_date, UTC),
            smoke_target=smoke_target_of(plan),
            gpu_tests=gpu_tests_of(before, after),
            engine_checkpoints=engine_checkpoints_of_patch(before, after),
        )
