"""JSON log lines (``AKIRA_LOG__FORMAT=json``): one object a line, for log shippers.

The message is formatted first, so the secret-redacting filter on the handler
(akira_bot.cli.RedactSecrets) has already replaced any configured secret in it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)
