"""Each person's own words for full-text search: one FTS5 token per (owner, word).

The full-text index used to hold plain words plus one token for the owner, and every
search ANDed the two. Chat words are common, so their postings span every person in the
database: the AND walked (and decoded) the postings of everybody who ever said "today".
With 1,000 people and 40,000 turns that cost 2-3 ms of CPU a search, growing with the
database. Here every word is indexed as the owner's key joined to it, so a search reads
only that person's postings: 0.4-0.6 ms on the same file, the same results.

How the token is made matters because the index is stemmed (``porter``, so "research"
finds "researching"): the stemmer looks at the whole token. The owner's key is a fixed
length of consonants other than w, x and y: the stemmer's measure of a word (its count of
vowel-consonant runs), its "contains a vowel" test and its suffix rules then see the word
as if it stood alone; a word under three letters, which the stemmer leaves alone, gets an
end it cannot strip (:func:`owner_word`). Over the 79,173 ASCII words of the LoCoMo and
emotion data, 38 stem differently from the bare word: three-letter words that start with
a vowel ("one" stays "one" where the bare word became "on", the same stem as "on") and a
few that start with y. ``ascii`` tokenizing keeps the joined token whole (any non-ASCII character is part
of a token), so words are folded here (lower case, accents off: "cabeça" -> "cabeca").

The SQL function :data:`SQL_FUNCTION` runs in the triggers that keep the index in sync, so
every connection that writes ``nodes`` must have it (:class:`core.storage.database.
Database` registers it on each of its own). Changing how tokens are made needs a
migration that rebuilds the index: a contentless index deletes a row by being given the
tokens it was given when the row was added.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable

from core.embeddings.hashing import fold

# The name the triggers call; (owner, content) -> the indexed text.
SQL_FUNCTION = "akira_owner_words"

_WORD = re.compile(r"[^\W_]+")  # letters and digits: "_" splits, as FTS tokenizers do
_KEY_LETTERS = "bcdfghjklmnpqrstvz"  # no vowels, no w/x/y: see the module's docstring
_KEY_LENGTH = 15  # 18**15 ~ 2**62 keys: a collision only adds rows a join drops
_SHORT_WORD_END = "\u00b7"  # a middle dot: see owner_word
MAX_QUERY_WORDS = 24  # a pasted essay must not become a 500-term OR query


@functools.lru_cache(maxsize=4096)  # every node written and every search asks for one
def owner_key(owner: str) -> str:
    """The fixed-length, consonants-only prefix standing for ``owner``."""
    number = int.from_bytes(hashlib.blake2b(owner.encode("utf-8"), digest_size=8).digest())
    letters = []
    for _ in range(_KEY_LENGTH):
        number, digit = divmod(number, len(_KEY_LETTERS))
        letters.append(_KEY_LETTERS[digit])
    return "".join(letters)


def words(text: str) -> list[str]:
    """Folded words of ``text`` in order of first appearance, each once."""
    return list(dict.fromkeys(_WORD.findall(fold(text))))


def owner_word(key: str, word: str) -> str:
    """One indexed token. The stemmer leaves a bare word under three characters alone
    ("is" stays "is"), but the joined token is long: a word that short ends in a mark no
    suffix rule matches (not a letter or digit, so no word holds it; not ASCII, so the
    tokenizer keeps it in the token)."""
    return key + word if len(word) >= 3 else key + word + _SHORT_WORD_END


def owner_words(owner: str | None, content: str | None) -> str:
    """What the index holds for one node: each of its words joined to the owner's key."""
    if not owner or not content:
        return ""
    key = owner_key(owner)
    return " ".join(owner_word(key, word) for word in words(content))


def search_words(text: str, stop_words: Iterable[str] = ()) -> list[str]:
    """The words of ``text`` a full-text search looks for (both backends): folded, words
    of one letter out, stop words out unless nothing else is left, at most
    :data:`MAX_QUERY_WORDS`."""
    found = [word for word in words(text) if len(word) > 1]
    stop = set(stop_words)
    kept = [word for word in found if word not in stop] or found
    return kept[:MAX_QUERY_WORDS]


def query_terms(owner: str, text: str, stop_words: Iterable[str] = ()) -> list[str]:
    """FTS5 terms finding ``owner``'s nodes that hold a word of ``text``
    (:func:`search_words`), quoted: nothing in the text is FTS syntax."""
    key = owner_key(owner)
    return [f'"{owner_word(key, word)}"' for word in search_words(text, stop_words)]
