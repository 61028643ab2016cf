"""The error every input check raises: one message per problem found."""

from __future__ import annotations


class InputError(Exception):
    """Invalid input: carries every message found, each naming file, item and field."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages
