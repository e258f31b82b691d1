"""What the chat commands say, in Brazilian Portuguese and English."""

from __future__ import annotations

from collections.abc import Mapping

TEXTS: Mapping[str, Mapping[str, str]] = {
    # /start and /help
    "start": {
        "pt": "Oi{name}! Eu sou {bot}. Converso com você e lembro do que importa.\n"
        "• /remember guarda algo que você quer que eu lembre\n"
        "• /memories mostra o que eu sei sobre você\n"
        "• /export te envia todos os seus dados; /forgetme apaga tudo\n"
        "Use /help para ver todos os comandos.",
        "en": "Hi{name}! I'm {bot}. I chat with you and remember what matters.\n"
        "• /remember stores something you want me to remember\n"
        "• /memories shows what I know about you\n"
        "• /export sends you all your data; /forgetme erases it all\n"
        "Use /help to see every command.",
    },
    "help_header": {"pt": "Comandos:", "en": "Commands:"},
    "help_admin_header": {"pt": "Para administradores:", "en": "For admins:"},
    # /remember
    "remember_usage": {
        "pt": "Uso: /remember <texto>, /remember chave: conteúdo ou "
        "/remember categoria/chave: conteúdo (categorias: {categories}). #tags viram etiquetas. "
        "Prioridade: !crítica, !alta, !normal ou !baixa no início ou no fim. Validade no fim: "
        "até 31/12/2026 (ou 2026-12-31, até sexta que vem) ou por 2 semanas. "
        "Ex.: /remember !alta viagem: Porto até 31/12/2026",
        "en": "Usage: /remember <text>, /remember key: content or "
        "/remember category/key: content (categories: {categories}). #hashtags become tags. "
        "Priority: !critical, !high, !normal or !low at the start or end. Expiry at the end: "
        "until 2026-12-31 (or 31/12/2026, until next friday) or for 2 weeks. "
        "E.g. /remember !high trip: Porto until 2026-12-31",
    },
    "remember_bad_priority": {
        "pt": "Não conheço a prioridade !{word}; use !crítica, !alta, !normal ou !baixa. "
        "Nada foi guardado.",
        "en": "Unknown priority !{word}; use !critical, !high, !normal or !low. "
        "Nothing was stored.",
    },
    "remember_bad_date": {
        "pt": "Não entendi a data “{text}”: escreva 31/12/2026, 2026-12-31, “sexta que vem” "
        "ou “por 2 semanas” (termine com um ponto final para guardar como texto). "
        "Nada foi guardado.",
        "en": "I couldn't read the date “{text}”: write 2026-12-31, 31/12/2026, “next friday” "
        "or “for 2 weeks” (end with a full stop to keep it as text). Nothing was stored.",
    },
    "remember_past_date": {
        "pt": "A data “{date}” já passou: nada foi guardado.",
        "en": "The date “{date}” has already passed: nothing was stored.",
    },
    "remember_too_far": {
        "pt": "Isso é daqui a mais de {years} anos: nada foi guardado.",
        "en": "That is more than {years} years away: nothing was stored.",
    },
    "remember_priority": {"pt": "Prioridade: {priority}.", "en": "Priority: {priority}."},
    "priority_critical": {"pt": "crítica", "en": "critical"},
    "priority_high": {"pt": "alta", "en": "high"},
    "priority_normal": {"pt": "normal", "en": "normal"},
    "priority_low": {"pt": "baixa", "en": "low"},
    "remember_expires": {"pt": "Vale até {date}.", "en": "Kept until {date}."},
    "remember_no_expiry": {"pt": "Sem validade.", "en": "No expiry."},
    "remember_limits": {
        "pt": "Não consegui guardar: chaves têm até {key} caracteres, o conteúdo até {content}, "
        "e até {tags} etiquetas de {tag} caracteres.",
        "en": "I couldn't store that: keys have up to {key} characters, content up to "
        "{content}, and up to {tags} tags of {tag} characters.",
    },
    "remember_bad_category": {
        "pt": "Categoria desconhecida. Use uma de: {categories}.",
        "en": "Unknown category. Use one of: {categories}.",
    },
    "remember_created": {
        "pt": "Guardado: {category}/{key}.",
        "en": "Saved: {category}/{key}.",
    },
    "remember_updated": {
        "pt": "Atualizado: {category}/{key} (a versão anterior fica no histórico).",
        "en": "Updated: {category}/{key} (the earlier version is kept in its history).",
    },
    "remember_unchanged": {
        "pt": "Eu já sabia disso: {category}/{key}.",
        "en": "I already knew that: {category}/{key}.",
    },
    # /memories
    "memories_usage": {
        "pt": "Uso: /memories [página] | <palavras> | #etiqueta | expiring [dias] | "
        "confirm <id> | edit <id> <novo texto> [!prioridade] [até <data>], "
        "por exemplo /memories 2, /memories pizza, /memories #viagem, /memories confirm 3f9a2c",
        "en": "Usage: /memories [page] | <words> | #tag | expiring [days] | "
        "confirm <id> | edit <id> <new text> [!priority] [until <date>], "
        "e.g. /memories 2, /memories pizza, /memories #travel, /memories confirm 3f9a2c",
    },
    "memories_search_too_long": {
        "pt": "Uma busca tem até {max} caracteres.",
        "en": "A search has at most {max} characters.",
    },
    "memories_bad_tag": {
        "pt": "Etiquetas têm até {tag} caracteres (no máximo {tags} por busca).",
        "en": "Tags have up to {tag} characters (at most {tags} in a search).",
    },
    "memories_search_header": {
        "pt": "Memórias com “{query}”: {count}",
        "en": "Memories matching “{query}”: {count}",
    },
    "memories_search_header_many": {
        "pt": "Memórias com “{query}” (as mais relevantes):",
        "en": "Memories matching “{query}” (the best matches):",
    },
    "memories_search_none": {
        "pt": "Nenhuma memória sua com “{query}”. /memories mostra todas.",
        "en": "None of your memories match “{query}”. /memories shows them all.",
    },
    "memories_more": {
        "pt": "Mostrando as {shown} primeiras; refine a busca para ver as outras.",
        "en": "Showing the first {shown}; narrow the search to see the rest.",
    },
    "memories_expiring_usage": {
        "pt": "Uso: /memories expiring [dias], de 1 a {max} (padrão: 7)",
        "en": "Usage: /memories expiring [days], 1 to {max} (default: 7)",
    },
    "memories_expiring_header": {
        "pt": "Memórias que expiram nos próximos {days} dia(s): {count}",
        "en": "Memories that expire within {days} day(s): {count}",
    },
    "memories_expiring_none": {
        "pt": "Nenhuma memória sua expira nos próximos {days} dia(s).",
        "en": "None of your memories expire within {days} day(s).",
    },
    "memories_until": {"pt": "(vale até {date})", "en": "(until {date})"},
    "memories_confirm_usage": {
        "pt": "Uso: /memories confirm <id> (os ids aparecem em /memories), "
        "por exemplo /memories confirm 3f9a2c",
        "en": "Usage: /memories confirm <id> (ids are shown by /memories), "
        "e.g. /memories confirm 3f9a2c",
    },
    "memories_edit_usage": {
        "pt": "Uso: /memories edit <id> <novo texto> [#etiquetas] [!prioridade] "
        "[até <data> | por 2 semanas | sem validade], por exemplo "
        "/memories edit 3f9a2c mora em Lisboa !alta",
        "en": "Usage: /memories edit <id> <new text> [#tags] [!priority] "
        "[until <date> | for 2 weeks | no expiry], e.g. /memories edit 3f9a2c lives in Lisbon !high",
    },
    "memories_id_not_found": {
        "pt": "Nenhuma memória sua tem o id {id}. Os ids aparecem em /memories.",
        "en": "No memory of yours has the id {id}. /memories shows the ids.",
    },
    "memories_id_ambiguous": {
        "pt": "Mais de uma memória começa com {id}; digite mais do id: {choices}",
        "en": "More than one memory starts with {id}; type more of the id: {choices}",
    },
    "memories_confirmed": {
        "pt": "Confirmada: {category}/{key} agora está verificada.",
        "en": "Confirmed: {category}/{key} is now verified.",
    },
    "memories_already_verified": {
        "pt": "{category}/{key} já estava verificada.",
        "en": "{category}/{key} was already verified.",
    },
    "memories_edited": {
        "pt": "Editada: {category}/{key} (a versão anterior fica no histórico).",
        "en": "Edited: {category}/{key} (the earlier version is kept in its history).",
    },
    "memories_edit_unchanged": {
        "pt": "Nada mudou em {category}/{key}.",
        "en": "Nothing changed in {category}/{key}.",
    },
    "memories_empty": {
        "pt": "Ainda não guardei nenhuma memória sobre você. Use /remember para me contar algo.",
        "en": "I haven't stored any memories about you yet. Use /remember to tell me something.",
    },
    "memories_no_page": {
        "pt": "Não há página {page}; são {pages} página(s).",
        "en": "There is no page {page}; there are {pages} page(s).",
    },
    "memories_header": {
        "pt": "O que eu sei sobre você — página {page}/{pages}\n"
        "{total} memória(s): {verified} verificada(s), {unverified} não verificada(s)",
        "en": "What I know about you — page {page}/{pages}\n"
        "{total} memories: {verified} verified, {unverified} unverified",
    },
    "memories_expired": {"pt": "(expirada)", "en": "(expired)"},
    "memories_next": {
        "pt": "Próxima página: /memories {page}",
        "en": "Next page: /memories {page}",
    },
    "memories_footer": {
        "pt": "Apagar: /forget <chave ou id>. Corrigir: /memories edit <id> <texto>. "
        "Memórias [unverified] foram deduzidas por mim: /memories confirm <id> as confirma.",
        "en": "Delete: /forget <key or id>. Correct: /memories edit <id> <text>. "
        "[unverified] memories are ones I inferred: /memories confirm <id> confirms one.",
    },
    # /forget
    "forget_usage": {
        "pt": "Uso: /forget <chave | categoria/chave | id> (os ids aparecem em /memories)",
        "en": "Usage: /forget <key | category/key | id> (ids are shown by /memories)",
    },
    "forget_not_found": {
        "pt": "Não encontrei nenhuma memória sua com essa chave ou id.",
        "en": "I found no memory of yours with that key or id.",
    },
    "forget_ambiguous": {
        "pt": "Essa chave existe em mais de uma categoria; diga qual: {choices}",
        "en": "That key is in more than one category; say which one: {choices}",
    },
    "forget_done": {"pt": "Esqueci: {category}/{key}.", "en": "Forgotten: {category}/{key}."},
    # /forgetme
    "forgetme_ask": {
        "pt": "⚠️ Isso apaga TUDO o que guardei sobre você: mensagens, memórias, perfil e "
        "histórico emocional. Não dá para desfazer (use /export antes se quiser uma cópia).\n"
        "Para confirmar, envie /forgetme {code} em até {minutes} minutos.",
        "en": "⚠️ This erases EVERYTHING I store about you: messages, memories, profile and "
        "emotional history. It cannot be undone (use /export first if you want a copy).\n"
        "To confirm, send /forgetme {code} within {minutes} minutes.",
    },
    "forgetme_no_request": {
        "pt": "Não há pedido pendente (ou ele expirou). Envie /forgetme para receber um código.",
        "en": "There is no pending request (or it expired). Send /forgetme to get a code.",
    },
    "forgetme_wrong_code": {
        "pt": "O código não confere. Nada foi apagado; envie /forgetme {code} para confirmar.",
        "en": "That code doesn't match. Nothing was erased; send /forgetme {code} to confirm.",
    },
    "forgetme_done": {
        "pt": "Pronto. Apaguei tudo sobre você ({total} registro(s)). Se voltar a falar comigo, "
        "começo do zero.",
        "en": "Done. I erased everything about you ({total} record(s)). If you talk to me "
        "again, I start from scratch.",
    },
    # /export
    "export_done": {
        "pt": "Aqui está tudo o que guardo sobre você: {messages} mensagem(ns), {memories} "
        "memória(s), perfil e estado emocional, no arquivo anexo (JSON).",
        "en": "Here is everything I store about you: {messages} message(s), {memories} "
        "memories, profile and emotional state, in the attached file (JSON).",
    },
    # /mood
    "mood_unknown": {
        "pt": "Ainda não li seu humor: converse um pouco comigo primeiro.",
        "en": "I haven't read your mood yet: chat with me a little first.",
    },
    "mood_state": {
        "pt": "Seu estado emocional, como eu percebo: {state}{confidence}.",
        "en": "Your emotional state, as I read it: {state}{confidence}.",
    },
    "mood_since": {"pt": "Desde: {when}.", "en": "Since: {when}."},
    "mood_recent": {"pt": "Leituras recentes:", "en": "Recent readings:"},
    # /mood <words>: a correction (akira_bot.commands.mood)
    "mood_usage": {
        "pt": "Uso: /mood mostra como eu te percebo. Se eu li errado: /mood <estado> "
        "(ex.: /mood feliz) ou /mood não <estado> (ex.: /mood não irritado). "
        "Estados: irritado, feliz, triste, confuso, neutro.",
        "en": "Usage: /mood shows how I read you. If I got it wrong: /mood <state> "
        "(e.g. /mood happy) or /mood not <state> (e.g. /mood not angry). "
        "States: angry, happy, sad, confused, neutral.",
    },
    "mood_corrected": {
        "pt": "Entendi, obrigado por me dizer: eu tinha lido {predicted} na sua última "
        "mensagem, mas você estava {corrected}. Corrigi isso e vou levar em conta.",
        "en": "Got it, thanks for telling me: I had read your last message as "
        "{predicted}, but you were {corrected}. I've corrected it and will keep it in mind.",
    },
    "mood_already": {
        "pt": "Foi assim que eu li sua última mensagem: {state}. Nada a corrigir.",
        "en": "That's how I read your last message: {state}. Nothing to correct.",
    },
    "mood_not_read": {
        "pt": "Não li nenhuma mensagem recente sua como {state}, então não há o que corrigir. "
        "Use /mood para ver como eu te percebo.",
        "en": "I haven't read any recent message of yours as {state}, so there is nothing "
        "to correct. Use /mood to see how I read you.",
    },
    "mood_hostile": {
        "pt": "Notei tensão nas nossas conversas recentes; vou manter um tom calmo e direto.",
        "en": "I noticed tension in our recent conversations; I'll keep a calm, direct tone.",
    },
    # admin
    "stats": {
        "pt": "Estatísticas\nUsuários: {users}\nMensagens: {messages}\n"
        "Memórias estruturadas: {memories} ({verified} verificadas, {unverified} não verificadas)\n"
        "No ar há: {uptime}\nLLM: {llm}\nEmbeddings: {embedder}\nDetector de emoção: {emotion}\n"
        "Tarefas em segundo plano: {background}",
        "en": "Statistics\nUsers: {users}\nMessages: {messages}\n"
        "Structured memories: {memories} ({verified} verified, {unverified} unverified)\n"
        "Uptime: {uptime}\nLLM: {llm}\nEmbeddings: {embedder}\nEmotion detector: {emotion}\n"
        "Background tasks: {background}",
    },
    # /stats: feedback (issue 24), everyone's numbers only
    "stats_feedback": {
        "pt": "Avaliações das respostas: 👍 {up} / 👎 {down}{share}",
        "en": "Reply ratings: 👍 {up} / 👎 {down}{share}",
    },
    "stats_feedback_share": {"pt": " ({share} positivas)", "en": " ({share} positive)"},
    "stats_corrections": {
        "pt": "Correções de humor (/mood): {total}{by_emotion}",
        "en": "Mood corrections (/mood): {total}{by_emotion}",
    },
    "stats_corrections_by": {"pt": "; lido como: {counts}", "en": "; read as: {counts}"},
    "none": {"pt": "nenhum", "en": "none"},
    "user_usage": {
        "pt": "Uso: /user <plataforma:id>, por exemplo /user telegram:42",
        "en": "Usage: /user <platform:id>, e.g. /user telegram:42",
    },
    "user_not_found": {
        "pt": "Não conheço o usuário {user}.",
        "en": "I don't know the user {user}.",
    },
    "user_info": {
        "pt": "Usuário {user}\nNome: {name}\nIdioma: {language}\nPrimeira vez: {created}\n"
        "Última vez: {seen}\nMensagens: {messages}\n"
        "Memórias: {memories} ({verified} verificadas, {unverified} não verificadas, "
        "{expired} expiradas)\nEstado emocional: {emotion}",
        "en": "User {user}\nName: {name}\nLanguage: {language}\nFirst seen: {created}\n"
        "Last seen: {seen}\nMessages: {messages}\n"
        "Memories: {memories} ({verified} verified, {unverified} unverified, "
        "{expired} expired)\nEmotional state: {emotion}",
    },
    "verify_usage": {
        "pt": "Uso: /verify <id mem_...> (os ids aparecem em /memories e nas exportações)",
        "en": "Usage: /verify <mem_... id> (ids are in /memories and in exports)",
    },
    "verify_not_found": {
        "pt": "Não existe memória com esse id.",
        "en": "There is no memory with that id.",
    },
    "verify_done": {
        "pt": "Verificada: {category}/{key} de {owner}.",
        "en": "Verified: {category}/{key} of {owner}.",
    },
    "verify_already": {
        "pt": "Essa memória já estava verificada ({category}/{key} de {owner}).",
        "en": "That memory was already verified ({category}/{key} of {owner}).",
    },
    # /profile (built-in plugin profile) and its part of /user
    "profile_empty": {
        "pt": "Ainda não aprendi muito sobre você: converse comigo um pouco primeiro.",
        "en": "I haven't learned much about you yet: chat with me a little first.",
    },
    "profile_header": {"pt": "O que aprendi sobre você:", "en": "What I've learned about you:"},
    "profile_topics": {
        "pt": "Assuntos de que você gosta: {topics}",
        "en": "Topics you care about: {topics}",
    },
    "profile_style": {"pt": "Seu jeito de escrever: {style}", "en": "How you write: {style}"},
    "profile_messages": {
        "pt": "Mensagens suas que guardo: {messages} (desde {since})",
        "en": "Messages of yours I keep: {messages} (since {since})",
    },
    "profile_footer": {
        "pt": "Aprendo isso das suas mensagens, e o que é antigo vai perdendo peso. "
        "/export mostra tudo; /forgetme apaga.",
        "en": "I learn this from your messages, and older ones count less and less. "
        "/export shows it all; /forgetme erases it.",
    },
    "user_profile": {
        "pt": "Assuntos favoritos: {topics}\nEstilo: {style}",
        "en": "Favourite topics: {topics}\nStyle: {style}",
    },
}

# Emotional state names (the states file uses Portuguese names) as shown to people.
STATE_NAMES: Mapping[str, Mapping[str, str]] = {
    "agressivo": {"pt": "irritado(a)", "en": "irritated"},
    "feliz": {"pt": "feliz", "en": "happy"},
    "triste": {"pt": "triste", "en": "sad"},
    "confuso": {"pt": "confuso(a)", "en": "confused"},
    "neutro": {"pt": "neutro", "en": "neutral"},
}


# Communication-style traits (core.profile.style) and languages, as shown to people.
PROFILE_TRAITS: Mapping[str, Mapping[str, str]] = {
    "short": {"pt": "mensagens curtas", "en": "short messages"},
    "medium": {"pt": "mensagens médias", "en": "medium-length messages"},
    "long": {"pt": "mensagens longas", "en": "long messages"},
    "formal": {"pt": "formal", "en": "formal"},
    "informal": {"pt": "informal", "en": "informal"},
    "emoji": {"pt": "usa emoji", "en": "uses emoji"},
    "slang": {"pt": "usa gírias", "en": "uses slang"},
    "questions": {"pt": "faz muitas perguntas", "en": "asks many questions"},
    "pt": {"pt": "escreve em português", "en": "writes in Portuguese"},
    "en": {"pt": "escreve em inglês", "en": "writes in English"},
}


def tr(name: str, language: str | None, /, **values: object) -> str:
    """The text ``name`` in ``language`` (Portuguese when unknown), formatted with
    ``values`` (positional-only, so a text may have ``{key}`` or ``{language}`` fields)."""
    variants = TEXTS[name]
    text = variants.get(language or "pt") or variants["pt"]
    return text.format(**values) if values else text


def state_name(state: str, language: str | None) -> str:
    names = STATE_NAMES.get(state)
    if names is None:
        return state
    return names.get(language or "pt") or names["pt"]
