"""Moved to :mod:`akira_bot.testing.telegram_api` (shipped with the package); this old path stays
importable for existing tests: it is the same module object."""

import sys

from akira_bot.testing import telegram_api as _moved

sys.modules[__name__] = _moved
