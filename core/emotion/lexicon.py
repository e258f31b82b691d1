"""Word-list emotion detector for Portuguese and English: no ML, always available.

Words are matched on folded text (lowercase, no accents) by stem prefix, so "ridícula",
"ridiculo" and "ridiculous" all hit ``ridicul``. A negator shortly before a cue changes its
meaning: "não estou feliz" reads triste, "não é ridículo" loses its aggression, and
"não entendi" is the usual way of being confused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.embeddings import fold
from core.emotion.detector import EmotionDetector, EmotionReading

_TOKEN = re.compile(r"[a-z0-9]+|\?")

# Stems (prefixes of folded tokens). Kept specific on purpose: a short stem would fire on
# unrelated words ("odi" would catch "odisseia").
CUES: dict[str, tuple[str, ...]] = {
    "agressivo": (
        # pt
        "inutil",
        "ridicul",
        "idiot",
        "imbecil",
        "burr",
        "estupid",
        "otari",
        "babaca",
        "palhac",
        "lixo",
        "porcaria",
        "merda",
        "porra",
        "caralh",
        "droga",
        "odeio",
        "odio",
        "raiva",
        "irrita",
        "furios",
        "puto",
        "puta",
        "vsf",
        "pqp",
        "fdp",
        "incompetent",
        "absurd",
        "vergonha",
        "nojo",
        "nojent",
        "ladra",
        "cala a boca",
        "vai se ferrar",
        "vai tomar",
        "patetic",
        "desgrac",
        "maldit",
        "saco cheio",
        "ninguem aguenta",
        "nao aguento mais",
        "nao presta",
        "aff",
        # en
        "useless",
        "stupid",
        "idiot",
        "dumb",
        "moron",
        "pathetic",
        "garbage",
        "trash",
        "crap",
        "shit",
        "fuck",
        "damn",
        "hate",
        "angry",
        "furious",
        "annoy",
        "ridicul",
        "disgust",
        "shut up",
        "worst",
        "incompetent",
        "sick of",
    ),
    "feliz": (
        # pt
        "feliz",
        "alegr",
        "obrigad",
        "valeu",
        "adorei",
        "amei",
        "amo ",
        "otimo",
        "maravilh",
        "incrivel",
        "perfeit",
        "parabens",
        "legal ",
        "show de bola",
        "animad",
        "aliviad",
        "que alivio",
        "orgulh",
        "kkk",
        "hahah",
        "rsrs",
        "consegui",
        "lindo",
        "linda",
        "gostei",
        "top ",
        "massa ",
        # en
        "happy",
        "glad",
        "thank",
        "love",
        "great",
        "awesome",
        "amazing",
        "wonderful",
        "excited",
        "congrat",
        "lol",
        "haha",
        "proud",
        "relieved",
        "yay",
        "nice",
        "excellent",
        "fantastic",
        "enjoy",
    ),
    "triste": (
        # pt
        "triste",
        "tristeza",
        "chorei",
        "chorando",
        "chorar",
        "sozinh",
        "solidao",
        "saudade",
        "deprimid",
        "depressao",
        "desanimad",
        "arrasad",
        "decepcion",
        "chatead",
        "magoad",
        "sofr",
        "luto",
        "morreu",
        "faleceu",
        "perdi ",
        "vazio",
        "fracass",
        "ansied",
        "ansios",
        "nervos",
        "medo",
        "preocupad",
        "angusti",
        "infeliz",
        "arrepend",
        "que pena",
        "mal hoje",
        "nao to bem",
        "nao estou bem",
        "cansad de tudo",
        # en
        "sad ",
        "sadness",
        "unhappy",
        "depress",
        "lonely",
        "alone",
        "miss ",
        "cry ",
        "crying",
        "grief",
        "died",
        "passed away",
        "heartbroken",
        "disappoint",
        "regret",
        "sorry for",
        "anxious",
        "anxiety",
        "nervous",
        "afraid",
        "scared",
        "worried",
        "hopeless",
    ),
    "confuso": (
        # pt
        "confus",
        "perdid",
        "nao entendi",
        "nao entendo",
        "nao entendendo",
        "nao saquei",
        "nao compreend",
        "nao faz sentido",
        "nao sei se",
        "nao sei como",
        "nao sei o que",
        "nao sei qual",
        "como assim",
        "to boiando",
        "boiando",
        "duvida",
        "hein",
        "ue ",
        "oi ?",
        "que isso",
        "como funciona",
        "como faz",
        "como que",
        "como eu faco",
        "nao ficou claro",
        "me perdi",
        "explica de novo",
        "explica melhor",
        "n entendi",
        # en
        "confused",
        "confusing",
        "don t understand",
        "dont understand",
        "don t get",
        "not sure",
        "what do you mean",
        "makes no sense",
        "doesn t make sense",
        "no idea",
        "huh",
        "how does",
        "unclear",
        "i m lost",
        "i am lost",
    ),
}

# Positive cues that flip to sadness when negated.
_FLIP_TO_SAD = {"feliz", "alegr", "gostei", "happy", "glad", "great", "otimo"}
_NEGATORS = {
    "nao",
    "nunca",
    "nem",
    "jamais",
    "n",
    "not",
    "never",
    "no",
    "dont",
    "don",
    "isn",
    "wasn",
    "nothing",
    "sem",
}
_NEGATION_WINDOW = 3  # tokens before a cue


def _index_cues() -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str, float]]]:
    stems: dict[str, list[tuple[str, str]]] = {}
    phrases: list[tuple[str, str, float]] = []
    for label, cues in CUES.items():
        for cue in cues:
            if " " in cue:
                phrases.append((label, f" {cue}", 1.5 if " " in cue.strip() else 1.0))
            else:
                stems.setdefault(cue, []).append((label, cue))
    return stems, phrases


def _normalise(text: str) -> str:
    return " " + " ".join(_TOKEN.findall(fold(text).replace("?", " ? "))) + " "


_STEMS, _PHRASES = _index_cues()


class LexiconDetector(EmotionDetector):
    """Keyword scoring with negation; ``neutro`` when no cue is found."""

    name = "lexicon"
    inline = True

    def _detect_batch(self, texts: Sequence[str]) -> list[EmotionReading]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> EmotionReading:
        norm = _normalise(text)
        tokens = norm.split()
        weights = dict.fromkeys(CUES, 0.0)
        for label, phrase, weight in _PHRASES:
            # A phrase, or a stem with a trailing space meaning "this exact word":
            # matched on the space-joined token string at a word start.
            if phrase in norm:
                weights[label] += weight
        for position, token in enumerate(tokens):
            # Every stem that starts this token, found by probing its prefixes (a few
            # dict lookups) rather than trying every stem on every token.
            for end in range(1, len(token) + 1):
                for label, stem in _STEMS.get(token[:end], ()):
                    negated = any(
                        t in _NEGATORS
                        for t in tokens[max(0, position - _NEGATION_WINDOW) : position]
                    )
                    if not negated:
                        weights[label] += 1.0
                    elif label == "feliz" and stem in _FLIP_TO_SAD:
                        weights["triste"] += 1.0
                    # A negated aggressive, sad or confused cue ("não é ridículo",
                    # "não estou triste") is no evidence either way.
        # Shouting makes an aggressive reading more certain, not a neutral one aggressive.
        if weights["agressivo"] > 0 and (text.count("!") >= 2 or _mostly_caps(text)):
            weights["agressivo"] += 0.5
        if weights["confuso"] == 0 and text.count("?") >= 2:
            weights["confuso"] += 0.5
        total = sum(weights.values())
        if total == 0:
            return EmotionReading("neutro", 0.6)
        label = max(weights, key=lambda k: weights[k])
        best = weights[label]
        certainty = min(0.95, 0.55 + 0.15 * best)
        return EmotionReading(label, round(certainty * best / total, 4))


def _mostly_caps(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return len(letters) >= 8 and sum(c.isupper() for c in letters) / len(letters) > 0.7
