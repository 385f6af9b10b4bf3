"""The one exception type a user sees: a one-line message and an exit code."""


class BotError(Exception):
    """An expected failure: bad input, a missing tree, a refused edit.

    The CLI prints ``bot: <message>`` on one line and exits with ``exit_code``;
    it never shows a traceback for these.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
