"""The person who attests, as tests play them: the real attesters of bot/publish/attestation.py
with a scripted answer (what a submitter types at the confirmation prompt)."""

from __future__ import annotations

from pathlib import Path

from bot.publish.attestation import Attester, at_terminal

# The submitter reads the diff and the exact body, and answers y.
READS = at_terminal(lambda _shown: None, lambda _question: True)
# The submitter reads them and answers n.
DECLINES = at_terminal(lambda _shown: None, lambda _question: False)


def reads(shown: list[str]) -> Attester:
    """The submitter who answers y, keeping what they were shown."""
    return at_terminal(shown.append, lambda _question: True)


def cli_publish_argv(plan_dir: Path, *extra: str) -> list[str]:
    """``bot publish PLAN --read-every-line --body-sha SHA`` for the body ``--preview`` shows
    now (run in this process, as the submitter would before reading it)."""
    import contextlib
    import io
    import re

    from bot.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["publish", str(plan_dir), *extra, "--preview"]) == 0, printed.getvalue()
    print(printed.getvalue(), end="")  # what the submitter read, for the caller to see too
    found = re.search(r"--body-sha ([0-9a-f]{64})", printed.getvalue())
    assert found, printed.getvalue()
    return ["publish", str(plan_dir), *extra, "--read-every-line", "--body-sha", found[1]]
