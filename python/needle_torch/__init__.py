"""PyTorch side of needle: the Needle 2 forward pass, QAT training and export (python/README.md)."""
