"""What the privileged half re-derives instead of trusting the plan artifact.

``bot publish`` holds the write token; the plan directory was written by a job that ran
upstream code. So before anything is pushed: every field that reaches git or GitHub is
validated (identifiers, single-line commit text without trailers or @mentions, the configured
upstream), the patch is the one verification saw (its hash), and the commit's tree changes only
the files the plan's edits declare, each only as the plan's recipe allows for that edit kind
(:mod:`bot.confinement`, which verify runs too). An unknown recipe or kind is refused.
"""

from __future__ import annotations

import re

from bot.config import GitHubSettings
from bot.confinement import identifier
from bot.content_hash import patch_hash, review_hash
from bot.errors import BotError
from bot.github.identity import (
    FINGERPRINT,
    branch_name,
    fingerprint,
    group_branch_name,
    group_fingerprint,
    has_body_sha,
    is_identity_line,
)
from bot.plan import READY, Member, Plan, PlanDir

# The reason is the commit body's paragraph: a finding's summary plus why no registry entry
# (a wrapper's names its language model and the family it covers).
REASON_LIMIT = 1000
_RECIPE = re.compile(r"^[a-z0-9][a-z0-9-]{0,49}$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
# A line git (or GitHub) would read as a trailer: "Token: value" / "Token #value".
_TRAILER_LIKE = re.compile(r"^\s*[A-Za-z0-9][A-Za-z0-9-]*\s*(:|\s#)")
_TRAILER_WORD = re.compile(r"(?i)[a-z0-9]-by\s*:|co-authored|signed-off|change-id\s*:")
# pr.md's body outside code: no @mention, no trailer, no closing keyword for another issue.
_FENCED = re.compile(r"(?ms)^[ ]{0,3}(`{3,}|~{3,}).*?^[ ]{0,3}\1[`~]*[ \t]*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
# ``_`` is no word character to GitHub's mentions (``_@login_`` pings); ``&#64;`` is an @.
_AT = r"(?:@|&#0*64;|&#x0*40;)"
_QUESTION_MENTION = re.compile(r"(?i)(?<![A-Za-z0-9.+-])" + _AT + r"[A-Za-z0-9]")
_MENTION = re.compile(r"(?i)(?<![A-Za-z0-9`/.+-])" + _AT + r"[A-Za-z0-9]")
# The group write-up folds each member into <details><summary> (no attributes): nothing else.
_HTML = re.compile(r"<(?!/?(?:details|summary)>)[A-Za-z/!?]")
_LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]*)")
_BARE_URL = re.compile(r"(?i)(?:https?://|www\.)[^\s)<>\]]+")
_CLOSES = re.compile(
    r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b[\s:]*"
    r"((?:[\w.-]+/[\w.-]+)?#\d+|https?://\S+?/(?:issues|pull)/\d+)"
)


# --- fields ---------------------------------------------------------------------------------


def commit_text(value: object, field: str, limit: int = 300) -> str:
    """``value`` if it may go into a commit message as one line of prose, else a BotError."""
    if not isinstance(value, str) or not value.strip():
        raise BotError(f"the plan's {field} is empty or not text")
    text = value.strip()
    problem = None
    if len(text) > limit:
        problem = f"longer than {limit} characters"
    elif not text.isprintable():  # newlines, control and bidi-override characters
        problem = "not a single line of printable text"
    elif "@" in text:
        problem = "an @mention"
    elif _TRAILER_LIKE.match(text) or _TRAILER_WORD.search(text):
        problem = "trailer-looking text"
    if problem:
        raise BotError(f"the plan's {field} holds {problem}; refusing to publish it")
    return text


def check_plan_fields(planned: PlanDir, settings: GitHubSettings) -> None:
    """Every plan field publish uses, validated; the upstream is the configured one."""
    plan = planned.plan
    if not _REPO.match(settings.upstream):
        raise BotError(f"BOT_UPSTREAM {settings.upstream!r} is not owner/name")
    if plan.upstream != settings.upstream:
        raise BotError(
            f"the plan was made for {plan.upstream!r}, not the configured upstream "
            f"{settings.upstream!r} (BOT_UPSTREAM); refusing to publish it"
        )
    if plan.class_name is not None:
        identifier(plan.class_name, "class_name")
    # Questions are posted with backticks escaped, so an @ anywhere would ping someone.
    if any(_QUESTION_MENTION.search(str(q)) for q in plan.questions or []):
        raise BotError("a question in the plan holds an @mention; refusing to post it")
    if plan.status != READY:
        return
    if not isinstance(plan.fingerprint, str) or not FINGERPRINT.match(plan.fingerprint):
        raise BotError("the plan's fingerprint is not a bot fingerprint")
    if plan.is_group:
        check_group(plan)
    else:
        if not isinstance(plan.recipe, str) or not _RECIPE.match(plan.recipe):
            raise BotError("the plan's recipe is not a recipe name")
        identifier(plan.class_name, "class_name")
        check_identity(plan)
    pull_request_title(planned)
    commit_text(plan.reason, "reason", limit=REASON_LIMIT)
    check_pr_body(planned)


def check_identity(plan: Plan) -> None:
    """Branch and fingerprint are re-derived from the recipe, the class, its platform variant
    and the base commit, as propose makes them: a plan cannot push to, or adopt the PR of,
    another fix's branch."""
    member = plan.single_member()
    if member is None:
        raise BotError("the plan names no recipe, class or finding; refusing to publish it")
    _check_variant(member, "the plan's")
    recipe, class_name, variant = member.recipe, member.class_name, member.variant
    if (plan.branch, plan.fingerprint) != (
        branch_name(recipe, class_name, variant),
        fingerprint(recipe, class_name, variant, plan.base_commit or ""),
    ):
        raise BotError(
            "the plan's branch or fingerprint is not the one its recipe, class and base commit "
            "give; refusing to publish it"
        )


def check_group(plan: Plan) -> None:
    """A group plan: every member is a class fix publish can check (its recipe, class, finding,
    fingerprint and commit text), none needs per-class runtime evidence, and the group's own
    fingerprint and branch are the ones its name and members give."""
    from bot.publish.evidence import required_checks

    if not isinstance(plan.group, str) or not _GROUP.match(plan.group):
        raise BotError("the plan's group is not a group name")
    if len(plan.members) < 2:
        raise BotError("a group plan needs at least two members")
    seen: set[str] = set()
    for member in plan.members:
        check_member(member, plan.base_commit or "")
        if member.fingerprint in seen:
            raise BotError(f"the group lists {member.class_name} twice; refusing it")
        seen.add(member.fingerprint)
        if required_checks(member.recipe):
            raise BotError(
                f"{member.class_name} ({member.recipe}) needs its own runtime evidence, which "
                "a group plan does not carry; plan it on its own"
            )
    fingerprints = plan.member_fingerprints
    expected = (
        group_branch_name(plan.group, fingerprints),
        group_fingerprint(plan.group, fingerprints, plan.base_commit or ""),
    )
    if (plan.branch, plan.fingerprint) != expected:
        raise BotError(
            "the plan's branch or fingerprint is not the one its group and members give; "
            "refusing to publish it"
        )


def check_member(member: Member, base_commit: str) -> None:
    """One group member: the fields its commit and its checks read."""
    if not _RECIPE.match(member.recipe):
        raise BotError("a member's recipe is not a recipe name")
    identifier(member.class_name, "a member's class_name")
    finding = member.finding
    if finding.class_name != member.class_name or finding.recipe != member.recipe:
        raise BotError(f"{member.class_name}: the member's finding is for another class")
    _check_variant(member, "the member's")
    if member.fingerprint != fingerprint(
        member.recipe, member.class_name, member.variant, base_commit
    ):
        raise BotError(f"{member.class_name}: the member's fingerprint is not its own")
    commit_text(member.title, f"{member.class_name}'s title", limit=120)
    commit_text(member.reason, f"{member.class_name}'s reason", limit=REASON_LIMIT)
    if not member.patch.strip():
        raise BotError(f"{member.class_name}: a group member has no commit (empty patch)")


def _check_variant(member: Member, whose: str) -> None:
    """The member's platform variant is its finding's file's (or none: a fix for every
    variant)."""
    from bot.recipes.base import platform_variant

    if member.variant not in (None, platform_variant(member.finding)):
        raise BotError(f"{member.class_name}: {whose} platform variant is not its file's")


def check_pr_body(planned: PlanDir) -> None:
    """pr.md's body becomes the PR's description (and, on a squash merge, part of the
    commit): outside code it may not ping anyone, carry a trailer, or close another issue.
    The recipe's templates write no image, no HTML and links only into the upstream
    repository, so the artifact's text may hold nothing else (the bot's own sections are
    composed again at publish from records and are not read from it)."""
    prose = _CODE_SPAN.sub("", _FENCED.sub("", _recipe_text(planned.pr_body)))
    upstream_prefix = f"https://github.com/{planned.plan.upstream}/"
    targets = _LINK_TARGET.findall(prose) + _BARE_URL.findall(prose)
    problem = None
    if "![" in prose:
        problem = "an image"
    elif _HTML.search(prose):
        problem = "raw HTML"
    elif any(not _inside(target, upstream_prefix) for target in targets):
        outside = next(t for t in targets if not _inside(t, upstream_prefix))
        problem = f"a link outside {planned.plan.upstream} ({outside[:60]})"
    elif _MENTION.search(prose):
        problem = "an @mention"
    elif any(_TRAILER_WORD.search(line) for line in prose.splitlines()):
        problem = "trailer-looking text"
    else:
        upstream = planned.plan.upstream
        allowed = {
            ref
            for number in planned.plan.issues
            for ref in (f"#{number}", f"https://github.com/{upstream}/issues/{number}")
        }
        closes = [ref for ref in _CLOSES.findall(prose) if ref not in allowed]
        if closes:
            problem = f"a closing keyword for {closes[0][:60]}"
    if problem:
        raise BotError(f"pr.md's body holds {problem} outside code; refusing to publish it")


def _inside(target: str, prefix: str) -> bool:
    """A link that stays in the upstream repository once a browser resolves it: the prefix,
    and no ``.``/``..`` segment, encoded dot or backslash to climb out of it."""
    if not target.startswith(prefix):
        return False
    path = target[len(prefix) :].split("#", 1)[0].split("?", 1)[0]
    if "\\" in path or re.search(r"(?i)%2e|%2f|%5c", path):
        return False
    return not any(segment in (".", "..") for segment in path.split("/"))


def _recipe_text(body: str) -> str:
    """pr.md's body without the sections the bot composes again at publish."""
    from bot.publish.contribution import CHECKLIST, CLAIMS, CONTRIBUTION, strip_block
    from bot.publish.render import END, START

    for markers in (CONTRIBUTION, CHECKLIST, CLAIMS, (START, END)):
        body = strip_block(body, markers)
    return "\n".join(
        line for line in body.split("\n") if not is_identity_line(line) and not has_body_sha(line)
    )


def pull_request_title(planned: PlanDir) -> str:
    """The one title of the PR and the commit: pr.md's first line, the plan's title if it has
    one (they must agree), validated as commit text."""
    plan_title, pr_title = planned.plan.title, planned.pr_title.strip()
    title = commit_text(plan_title if plan_title is not None else pr_title, "title", limit=120)
    if pr_title and title != pr_title:
        raise BotError("pr.md's title is not the plan's title; re-run `bot propose`")
    return title


def check_approval(planned: PlanDir, approved_hash: str | None) -> None:
    """With ``approved_hash``, the plan is what a maintainer reviewed: patch.diff, pr.md and
    every plan.json field publish reads (any status: a plan turned into a question after
    approval is not what was approved)."""
    if approved_hash is not None and approved_hash != review_hash(
        planned.patch, planned.pr_markdown, planned.plan
    ):
        raise BotError("the plan is not what the maintainer approved; review it again")


def check_hashes(planned: PlanDir, approved_hash: str | None) -> None:
    """The patch is the one verification checked; with ``approved_hash``, what a maintainer
    reviewed (:func:`check_approval`)."""
    check_approval(planned, approved_hash)
    verification = planned.plan.verification
    verified = verification.patch_hash if verification else None
    if not verified:
        raise BotError("the plan has not been verified: run `bot verify PLAN_DIR` first")
    if verified != patch_hash(planned.patch):
        raise BotError("patch.diff is not the patch that was verified; run `bot verify` again")


def commit_message(
    planned: PlanDir, git_name: str, git_email: str, credit: str | None = None
) -> str:
    """The commit message, only from validated fields: title, reason, issue number, the
    bot's credit trailer (``credit``, in the tree's form), the submitter's DCO sign-off."""
    plan = planned.plan
    title = pull_request_title(planned)
    issues = [plan.issue_number] if plan.issue_number else []
    return _message(title, plan.reason, issues, git_name, git_email, credit)


def member_commit_messages(
    planned: PlanDir, git_name: str, git_email: str, credit: str | None = None
) -> list[str]:
    """A group's commit messages, one per member in order (its own title, reason, issues)."""
    return [
        _message(m.title, m.reason, m.issues, git_name, git_email, credit)
        for m in planned.plan.members
    ]


def _message(
    title: str,
    reason: str,
    issues: list[int],
    git_name: str,
    git_email: str,
    credit: str | None = None,
) -> str:
    title = commit_text(title, "title", limit=120)
    reason = commit_text(reason, "reason", limit=REASON_LIMIT)
    name = commit_text(git_name, "submitter's name (BOT_SUBMITTER_NAME)", limit=100)
    if not re.fullmatch(r"[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+", git_email):
        raise BotError("BOT_SUBMITTER_EMAIL is not an e-mail address")
    lines = [title, "", reason, ""]
    if issues:
        lines += [*(f"Fixes #{int(n)}" for n in issues), ""]
    if credit:
        lines.append(credit)
    lines.append(f"Signed-off-by: {name} <{git_email}>")
    return "\n".join(lines) + "\n"
