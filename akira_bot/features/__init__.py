"""The built-in plugins: the same ``setup(api)`` API as any plugin (see
:mod:`akira_bot.plugins`), on by default, each switched off by leaving it out of
``AKIRA_BOT__BUILTINS``.

- ``emotion``: the detector, the per-person emotional state, the tone in the prompt;
- ``structured_memories``: /remember's store, its recall in the prompt, extraction;
- ``user_commands``: /start /help /remember /memories /forget /forgetme /export /mood;
- ``admin_commands``: /stats /user /verify;
- ``feedback``: thumbs up / down reactions to replies, stored as feedback on the turn.
- ``profile``: learns each person's favourite topics and style, the "about this person"
  prompt section, /profile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

# Built-in name -> its module, in the order they are set up.
MODULES: dict[str, str] = {
    "emotion": "akira_bot.features.emotion",
    "structured_memories": "akira_bot.features.structured_memory",
    "user_commands": "akira_bot.features.user_commands",
    "admin_commands": "akira_bot.features.admin_commands",
    "feedback": "akira_bot.features.feedback",
    "profile": "akira_bot.features.profile",
}


def builtin_modules(enabled: Sequence[str]) -> list[str]:
    """The modules of the ``enabled`` built-ins, in set-up order."""
    return [module for name, module in MODULES.items() if name in enabled]
