"""LLM access: the OpenAI-compatible client, recording, cache, local and fake servers."""
