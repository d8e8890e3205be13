"""Running a pack: the only code that writes to a destination or forks (claim, resume from
receipts, the process pool, finalize). Writes go through ``reader.storage.Storage``."""
