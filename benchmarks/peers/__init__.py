"""Sleuth side by side with FlashRAG, LangChain and DSPy on the same model, index and questions."""
