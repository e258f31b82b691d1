"""A cheap Portuguese/English guess from function words, for per-language priors."""

from __future__ import annotations

import re

from core.embeddings import fold

_WORD = re.compile(r"[a-z]+")
_LAUGH_PT = re.compile(r"\bk{3,}|\b(?:rs){2,}")

# Frequent words that are (nearly) exclusive to one language once accents are folded.
_PT = frozenset(
    "nao que e de do da dos das o os as um uma uns umas voce vc vcs eu ele ela eles elas "
    "isso isto esse essa este esta aquilo com para pra pro por pelo pela mas muito muita "
    "tambem tb ja so mais meu minha seu sua nos tem tenho estou esta estao ta to sim foi "
    "ser sao era q pq porque quando como onde qual quem aqui ai agora hoje entao bem "
    "obrigado obrigada ate sem nada tudo fazer fiz vou vai ne kkk kkkk "
    # chat spellings and other frequent words that English does not use
    "demais pqp aq aqui eh bom boa dia noite lindo linda porra tava desse dessa disso "
    "nessa nesse sou somos estamos vamos todos todas verdade falou tu te contigo comigo "
    "cmg td tbm msm mt mto mds nd hj agr mano gente ainda sempre nunca depois quero "
    "queria acho fica ficou fala falar gosto amo nossa nosso tudo vcs oq tmj".split()
)
_EN = frozenset(
    "the is are was were you your i me my he she they them it its this that these those "
    "and but with for of to in on at not no yes what why how when where who which do does "
    "did don have has had be been am will would can could should just so very really "
    "thanks thank please lol im dont its".split()
)


def guess_language(text: str) -> str:
    """``"pt"`` or ``"en"`` (the default when nothing tells them apart)."""
    words = _WORD.findall(fold(text))
    pt = sum(w in _PT for w in words)
    en = sum(w in _EN for w in words)
    # "a", "o", "e" are single letters in Portuguese only; "a" is also English, so the
    # sets above leave it out. Accented letters in the raw text point to Portuguese.
    if any(c in text.lower() for c in "ãõçáéíóúâêô"):
        pt += 1
    if _LAUGH_PT.search(text.lower()):  # "kkkkk", "rsrs"
        pt += 1
    return "pt" if pt > en else "en"
