"""Cross-cutting contracts: hostile input, nothing silent, the seams' change exercises, the import rules, lint, the tiers, the wheel."""
