"""The engines people already run, read as kinds: Celery, RQ, arq, LangGraph, Prefect.

Each module holds one adapter and imports its engine's client only when a kind names
that engine, so the core install loads none of them (docs/engines.md).
"""
