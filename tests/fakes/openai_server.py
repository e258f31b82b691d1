"""Moved to :mod:`akira_bot.testing.openai_server` (shipped with the package); this old path stays
importable for existing tests: it is the same module object."""

import sys

from akira_bot.testing import openai_server as _moved

sys.modules[__name__] = _moved
