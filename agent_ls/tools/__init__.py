"""The model-facing tools."""
