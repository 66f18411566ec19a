"""One table from API failures to :class:`ModelError`, for every SDK-backed provider.

A provider extracts the status, headers, message and error type from its SDK's exception and
asks :meth:`ProviderErrors.status_error`; everything else (retryable or not, retry-after, the
wording the user reads) is decided here. What differs between providers is data: their name,
their environment variables, the mid-stream error types that retrying cannot fix, and the few
rows only one API has (Anthropic's 529, OpenAI's ``insufficient_quota``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from agent_ls.ports.model import ModelError


@dataclass(frozen=True, slots=True)
class Rule:
    """How one failure reads and whether retrying the same turn may help.

    ``template`` may use ``{label}``, ``{status}``, ``{detail}``, ``{model}``, ``{kind}``,
    ``{key_env}`` and ``{base_url_env}``.
    """

    retryable: bool
    template: str


# Rows every provider shares, by HTTP status.
STATUS_RULES: Mapping[int, Rule] = {
    401: Rule(False, "{key_env} is not set or invalid (401): {detail}"),
    403: Rule(False, "the {label} API key may not use this model or endpoint (403): {detail}"),
    404: Rule(
        False,
        "model not found: {model} (404) — check the model name and {base_url_env}: {detail}",
    ),
    408: Rule(True, "{label} API error (408): {detail}"),
    409: Rule(True, "{label} API error (409): {detail}"),
    429: Rule(True, "{label} API rate limit reached (429): {detail}"),
}
SERVER_ERROR = Rule(True, "{label} API error ({status}): {detail}")  # any other 5xx
REJECTED = Rule(False, "the {label} API rejected the request ({status}): {detail}")  # other 4xx
# An ``error`` inside a 200 stream: retryable unless its type is one of the provider's fatal ones.
MID_STREAM = "{label} API error mid-stream ({kind}): {detail}"


@dataclass(frozen=True, slots=True)
class ProviderErrors:
    """A provider's names and its own rows of the table."""

    label: str  # "Anthropic": how messages name the API
    key_env: str
    base_url_env: str
    fatal_types: frozenset[str]  # mid-stream error types that retrying cannot fix
    # Rows checked before the shared ones: (status, error type or code), or (status, None)
    # for any error of that status.
    rows: Mapping[tuple[int, str | None], Rule] = field(default_factory=dict)

    def rule(self, status: int, error_types: Iterable[str | None] = ()) -> Rule:
        """The row for ``status`` (and the first matching error type or code)."""
        for error_type in error_types:
            if error_type is not None and (status, error_type) in self.rows:
                return self.rows[(status, error_type)]
        if (status, None) in self.rows:
            return self.rows[(status, None)]
        if status in STATUS_RULES:
            return STATUS_RULES[status]
        return SERVER_ERROR if status >= 500 else REJECTED

    def status_error(
        self,
        status: int | None,
        *,
        detail: str,
        model: str,
        headers: Mapping[str, str] | None = None,
        error_types: Iterable[str | None] = (),
    ) -> ModelError:
        """Classify an HTTP failure; ``status`` None (or 200) is an error event mid-stream.

        A server's ``x-should-retry: true|false`` overrides the table, as the SDKs honour it.
        """
        headers = headers or {}
        types = list(error_types)
        names = {"label": self.label, "key_env": self.key_env, "base_url_env": self.base_url_env}
        if status is None or status == 200:
            kind = next((t for t in types if t), None) or "api_error"
            retryable = kind not in self.fatal_types
            message = MID_STREAM.format(**names, kind=kind, detail=detail)
        else:
            rule = self.rule(status, types)
            retryable = rule.retryable
            message = rule.template.format(**names, status=status, detail=detail, model=model)
        should_retry = headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        return ModelError(message, retryable=retryable, retry_after=retry_after_seconds(headers))

    # -- failures without an HTTP status ------------------------------------------------

    def unreachable(self, cause: BaseException, exc: BaseException) -> ModelError:
        """No connection to the API (refused, DNS, TLS, timeout before a response), saying
        why as the network layer did (the SDK's own message is only "Connection error.")."""
        detail = (str(cause) if cause is not exc else "") or str(exc)
        return ModelError(
            f"cannot reach the {self.label} API ({type(cause).__name__}: {detail})",
            retryable=True,
        )

    def cut(self, cause: BaseException) -> ModelError:
        """The connection broke while the turn was streaming."""
        return ModelError(
            f"the {self.label} stream was cut before the turn completed ({type(cause).__name__})",
            retryable=True,
        )

    def ended_early(self) -> ModelError:
        """The stream ended cleanly but without the end of the turn."""
        return ModelError(
            f"the {self.label} stream ended before the turn completed", retryable=True
        )

    def malformed(self, exc: BaseException) -> ModelError:
        """The SDK could not parse what the API streamed."""
        return ModelError(f"malformed stream from the {self.label} API: {exc}", retryable=True)

    def client_error(self, exc: BaseException) -> ModelError:
        """Any other SDK failure: a bug or a misconfiguration, not worth a retry."""
        return ModelError(f"{self.label} client error: {exc}", retryable=False)


ANTHROPIC = ProviderErrors(
    label="Anthropic",
    key_env="ANTHROPIC_API_KEY",
    base_url_env="ANTHROPIC_BASE_URL",
    fatal_types=frozenset(
        {
            "invalid_request_error",
            "authentication_error",
            "permission_error",
            "not_found_error",
            "billing_error",
            "request_too_large",
        }
    ),
    rows={(529, None): Rule(True, "{label} API overloaded (529): {detail}")},
)

OPENAI = ProviderErrors(
    label="OpenAI",
    key_env="OPENAI_API_KEY",
    base_url_env="OPENAI_BASE_URL",
    fatal_types=frozenset({"invalid_request_error", "authentication_error", "permission_error"}),
    # A 429 for an exhausted quota does not clear by waiting.
    rows={(429, "insufficient_quota"): Rule(False, "{label} quota exhausted (429): {detail}")},
)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) as seconds."""
    with contextlib.suppress(ValueError):
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000)
    value = headers.get("retry-after")
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    import email.utils  # here: ~5 ms of the server's start for a header seldom sent

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
