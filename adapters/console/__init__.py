"""The terminal console adapter: interactive chat or one reply per piped line."""

from adapters.console.adapter import ConsoleAdapter, ConsoleConfig

__all__ = ["ConsoleAdapter", "ConsoleConfig"]
