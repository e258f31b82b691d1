"""What AKIRA learns about a person from how they write and what they talk about.

- :mod:`core.profile.decay`: counts that fade (forward decay on message time);
- :mod:`core.profile.style`: the communication style, measured per message;
- :mod:`core.profile.summary`: favourite topics and style from the stored counters;
- :mod:`core.profile.learner`: :class:`ProfileLearner`, learning from each message and
  import, and the "about this person" prompt text.

Storage keeps the counters (:class:`core.storage.api.ProfileStore`); the built-in plugin
``profile`` (akira_bot.features.profile) wires it into the engine.
"""

from core.profile.learner import ProfileLearner, about_section
from core.profile.style import CommunicationStyle, measure
from core.profile.summary import FavoriteTopic, PersonProfile, summarise

__all__ = [
    "CommunicationStyle",
    "FavoriteTopic",
    "PersonProfile",
    "ProfileLearner",
    "about_section",
    "measure",
    "summarise",
]
