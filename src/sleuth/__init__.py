"""Sleuth: multi-hop question answering by interleaving LLM reasoning with search."""

__version__ = "0.1.0"
