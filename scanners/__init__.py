"""Streaming scanners over large inputs: RL JSONL data (and logs)."""
