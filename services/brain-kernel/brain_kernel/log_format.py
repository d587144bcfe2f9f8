"""The server's log lines: text as uvicorn writes them, or one JSON object a line (``BRAIN_LOG_FORMAT=json``).

A request's id (its ``X-Request-ID`` when it sent a usable one, else a new
one) is held in a context variable for the request's life, so every line
logged while answering it, in the event loop or in a worker thread (FastAPI
copies the context), carries ``request_id``. In JSON the server writes its own
access line, with the route template, status and duration as fields, in
place of uvicorn's text one.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
from typing import Any

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("brain_request_id", default=None)
# A client's id is kept when it is short and plain (no spaces, quotes or control characters to forge a log line).
USABLE_ID = re.compile(r"^[A-Za-z0-9._:/+=-]{1,128}$")
# The standard attributes of a LogRecord: anything else passed through ``extra=`` becomes a JSON field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id when set, the ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = REQUEST_ID.get()
        if request_id is not None:
            line["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def logging_config(log_format: str, level: str = "INFO") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the server (uvicorn's ``log_config``, gunicorn's ``logconfig_dict``)."""
    if log_format == "json":
        formatter: dict[str, Any] = {"()": f"{__name__}.JsonFormatter"}
    else:
        formatter = {"format": "%(levelname)s:     %(message)s"}  # uvicorn's own look
    handler = {"class": "logging.StreamHandler", "formatter": "brain", "stream": "ext://sys.stderr"}
    access = {"handlers": ["default"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"brain": formatter},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            # JSON: the server's own access line (brain.access) replaces uvicorn's and gunicorn's text ones.
            "uvicorn.access": access if log_format != "json" else {**access, "level": "WARNING"},
            "gunicorn.error": {"handlers": ["default"], "level": level, "propagate": False},
            "gunicorn.access": access if log_format != "json" else {**access, "level": "WARNING"},
        },
    }


def masked_url(url: str | None) -> str:
    """A database URL with its password replaced by ``***`` (for the start-up banner)."""
    if not url:
        return "(none)"
    return re.sub(r"^([a-z0-9+]+://[^:/@]*):[^@]*@", r"\1:***@", url)
