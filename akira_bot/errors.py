"""Errors the command line explains in one line."""


class CLIError(Exception):
    """A failure explained in one line for the person at the terminal."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
