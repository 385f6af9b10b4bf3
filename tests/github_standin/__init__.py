"""A GitHub stand-in for tests: a stateful HTTP server on 127.0.0.1 plus bare git remotes."""

from .server import GitHubStandIn

# A token shaped like a real one, so that shape-based redaction is exercised too.
STANDIN_TOKEN = "ghp_standinTOKEN0123456789abcdefghijKLMN"
STANDIN_BOT_LOGIN = "vllm-eagle3-bot"
STANDIN_FORK_OWNER = "bot-fork"

__all__ = ["STANDIN_BOT_LOGIN", "STANDIN_FORK_OWNER", "STANDIN_TOKEN", "GitHubStandIn"]
