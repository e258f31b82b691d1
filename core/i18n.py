"""User-facing text in Brazilian Portuguese and English, chosen per user."""

from __future__ import annotations

import re
from collections.abc import Mapping

LANGUAGES = ("pt", "en")

# Short, very frequent words: enough to tell Portuguese from English in chat.
_PT = set(
    "oi olá ola tudo bem você voce vc não nao sim obrigado obrigada que como está esta "
    "estou sou meu minha isso essa esse para pra por com uma um muito tenho tem quero "
    "fazer faço ajuda hoje ontem amanhã agora porque qual quando onde quem eu tu ele ela "
    "nós eles de do da dos das no na nos nas ao à é são foi era mas mais também tambem "
    "aqui lá coisa dia bom boa noite tarde melhor ficou remédio dor cabeça sei".split()
)
_EN = set(
    "hi hello hey the a an is are was were you your i my me what how why when where who "
    "yes no not thanks thank please can could would should do does did have has had this "
    "that it to of in on for with and but or so just today tomorrow yesterday now good "
    "morning night help name am be been feel feeling better know think want".split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def detect_language(text: str, default: str | None = None) -> str | None:
    """ "pt", "en", or ``default`` when the text gives no clear signal."""
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return default
    pt = sum(w in _PT for w in words)
    en = sum(w in _EN for w in words)
    # Accented letters common in Portuguese and absent from English.
    if any(c in "ãõçâêôáéíóúà" for c in text.lower()):
        pt += 1
    if pt == en:
        return default
    return "pt" if pt > en else "en"


def normalise_locale(locale: str | None) -> str | None:
    if not locale:
        return None
    code = locale.lower().replace("_", "-").split("-")[0]
    return code if code in LANGUAGES else None


TEXTS: Mapping[str, Mapping[str, str]] = {
    "fallback": {
        "pt": "Desculpe, não consegui responder agora. Pode tentar de novo em instantes?",
        "en": "Sorry, I couldn't answer just now. Could you try again in a moment?",
    },
    "llm_down": {
        "pt": "Estou com dificuldade para pensar agora, mas guardei sua mensagem. Tente de novo daqui a pouco.",
        "en": "I'm having trouble thinking right now, but I saved your message. Please try again shortly.",
    },
    "rate_limited": {
        "pt": "Você está enviando mensagens rápido demais. Espere um pouco e eu continuo.",
        "en": "You're sending messages too fast. Give me a moment and I'll continue.",
    },
    "busy": {
        "pt": "Estou atendendo muita gente agora; sua mensagem foi guardada. Tente de novo em instantes.",
        "en": "I'm busy with many people right now; your message was saved. Please try again in a moment.",
    },
    "too_long": {
        "pt": "Sua mensagem era longa demais; considerei só os primeiros {limit} caracteres.",
        "en": "Your message was too long; I only read the first {limit} characters.",
    },
    "storage_full": {
        "pt": "Não consegui guardar isso agora: fiquei sem espaço para memórias. "
        "Tente de novo daqui a pouco.",
        "en": "I couldn't save that just now: I'm out of storage space. "
        "Please try again in a little while.",
    },
    "storage_unavailable": {
        "pt": "Não consegui guardar isso agora: meu banco de dados está fora do ar. "
        "Sua mensagem não foi registrada; tente de novo daqui a pouco.",
        "en": "I couldn't save that just now: my database is unreachable. "
        "Your message was not recorded; please try again in a little while.",
    },
    "empty": {
        "pt": "Não recebi nenhum texto. O que você queria dizer?",
        "en": "I didn't get any text. What did you want to say?",
    },
    "unknown_command": {
        "pt": "Não conheço o comando /{name}. Use /help para ver os comandos.",
        "en": "I don't know the command /{name}. Use /help to see the commands.",
    },
    "not_allowed": {
        "pt": "Este comando é só para administradores.",
        "en": "This command is for admins only.",
    },
    "command_failed": {
        "pt": "Algo deu errado com esse comando. Nada foi perdido; tente de novo.",
        "en": "Something went wrong with that command. Nothing was lost; please try again.",
    },
    # A reply that gave away AKIRA's instructions and left nothing else to say.
    "leak_refusal": {
        "pt": "Isso eu não posso compartilhar, mas sigo aqui para conversar. "
        "Sobre o que você quer falar?",
        "en": "That's something I can't share, but I'm happy to keep talking. What's on your mind?",
    },
    "unsupported_content": {
        "pt": "Por enquanto eu só entendo mensagens de texto.",
        "en": "For now I only understand text messages.",
    },
}


def t(key: str, language: str | None, **values: object) -> str:
    """The text ``key`` in ``language`` (Portuguese when unknown), formatted with ``values``."""
    variants = TEXTS[key]
    text = variants.get(language or "pt") or variants["pt"]
    return text.format(**values) if values else text


_AGO_UNITS = (  # (upper bound in seconds, unit size, pt singular, pt plural, en unit)
    (3600, 60, "minuto", "minutos", "minute"),
    (2 * 86400, 3600, "hora", "horas", "hour"),
    (60 * 86400, 86400, "dia", "dias", "day"),
    (730 * 86400, 30 * 86400, "mês", "meses", "month"),
    (float("inf"), 365 * 86400, "ano", "anos", "year"),
)


def ago(seconds: float, language: str | None) -> str:
    """A coarse relative time: "30 days ago" / "há 30 dias"."""
    pt = (language or "pt") == "pt"
    if seconds < 60:
        return "agora há pouco" if pt else "just now"
    for bound, size, one_pt, many_pt, unit_en in _AGO_UNITS:
        if seconds < bound:
            n = int(seconds // size)
            if pt:
                return f"há {n} {one_pt if n == 1 else many_pt}"
            return f"{n} {unit_en}{'' if n == 1 else 's'} ago"
    raise AssertionError("unreachable")
