"""GitPython's ``Repo`` whose git processes get the bot's minimal environment.

GitPython starts every git process from a copy of ``os.environ`` and can only add or override
variables, never remove one. So each variable :func:`bot.subprocess_env.minimal_env` would drop
(``GITHUB_TOKEN``, ``GITHUB_ENV``, ``ACTIONS_*``, ...) is overridden with an empty value: git,
and anything git starts, sees no credential and no runner command file. Variables the bot sets
for one command (its identity, a private index, the push credential) are passed as usual.
"""

from __future__ import annotations

import os
from typing import Any

import git

from bot.subprocess_env import minimal_env


def _blanked(keep: set[str]) -> dict[str, str]:
    allowed = minimal_env()
    return {name: "" for name in os.environ if name not in allowed and name not in keep}


class MinimalEnvGit(git.Git):
    def execute(self, command: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        chosen = dict(kwargs.get("env") or {})
        env = _blanked(set(self.environment()) | set(chosen))
        env.update(chosen)
        kwargs["env"] = env
        return super().execute(command, *args, **kwargs)


class Repo(git.Repo):
    """Use this, never ``git.Repo``, anywhere the bot runs git."""

    GitCommandWrapperType = MinimalEnvGit
