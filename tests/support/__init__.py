"""Test support, never shipped: the fake OpenAI-compatible server and its harness.

Importable as `support` with tests/ on sys.path (pytest's `pythonpath`; the
bench scripts insert it). The product (src/grumem) never imports it.
"""
