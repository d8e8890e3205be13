"""Bytes and rows in: storage with retries, the local disk cache, the checked index of a
packed dataset, and the episode pool that fetches episodes ahead of need."""
