"""Model providers: ``anthropic:<model>``, ``openai:<model>``, ``script:<path>``."""

from __future__ import annotations

from agent_ls import DEFAULT_MODEL
from agent_ls.ports.model import Model, ModelError

__all__ = ["DEFAULT_MODEL", "Model", "ModelError", "load_model"]


def load_model(spec: str, *, in_worker: bool = False) -> Model:
    """Build the provider named by ``spec`` (``provider:model``). Raises ``ValueError``.

    ``in_worker``: an SDK provider streams in the model worker process
    (:mod:`agent_ls.models.remote`) unless ``AGENT_LS_MODEL_WORKER=0``."""
    model = _local_model(spec)
    if in_worker:
        from agent_ls.models import remote
        from agent_ls.models.sdk import SdkModel

        if isinstance(model, SdkModel) and remote.enabled():
            return remote.RemoteModel(model)
    return model


def _local_model(spec: str) -> Model:
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ValueError(
            f"model {spec!r} is not of the form provider:model "
            "(anthropic:<model>, openai:<model> or script:<path>)"
        )
    if provider == "anthropic":
        from agent_ls.models.anthropic import AnthropicModel

        return AnthropicModel(rest)
    if provider == "openai":
        from agent_ls.models.openai import OpenAIModel

        return OpenAIModel(rest)
    if provider == "script":
        from agent_ls.models.script import ScriptModel

        return ScriptModel.from_file(rest)
    raise ValueError(f"unknown model provider {provider!r} (use anthropic, openai or script)")
