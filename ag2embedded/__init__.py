"""The hub and the AG2 gateway in one process (``python -m ag2embedded``): a launcher composing the two
services, neither of which imports the other (docs/ag2.md "One process")."""
