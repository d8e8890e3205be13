"""Tools over finished packs: ``verify``, ``info``/``sql`` (DuckDB) and ``preview`` (HTML)."""
